// What <rich-text nodes="{{nodes}}"> shows, for the tests: miniprogram-simulate
// registers rich-text as an empty element, so the node tree the component
// hands over is rendered here the way the mini program does it — a
// {type: "text"} node is text (escaped here, never parsed), an element node
// becomes that element with its class and style. validate() checks the tree
// against the rules of rich-text and of the component (an array, whitelisted
// tags, only class/style attributes, text children are text nodes).
'use strict';

const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
function esc(s) {
  return String(s).replace(/[&<>"']/g, function (c) { return ESC[c]; });
}

/** Text of a rich-text text node as shown: rich-text decodes HTML entities in it. */
function decode(s) {
  return String(s).replace(/&(#x[0-9a-f]+|#\d+|amp|lt|gt|quot|apos|nbsp);/gi, function (all, e) {
    const k = e.toLowerCase();
    if (k[0] === '#') return String.fromCodePoint(k[1] === 'x' ? parseInt(k.slice(2), 16) : parseInt(k.slice(1), 10));
    return { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' }[k];
  });
}

/**
 * @param {Array<object>} nodes
 * @param {Array<string>} tags allowed tag names
 * @param {Array<string>} attrs allowed attribute names
 * @returns {Array<string>} problems ([] when valid)
 */
function validate(nodes, tags, attrs) {
  const problems = [];
  if (!Array.isArray(nodes)) {
    problems.push('nodes is ' + typeof nodes + ', not an array');
    return problems;
  }
  (function walk(list, where) {
    list.forEach(function (n, i) {
      const at = where + '[' + i + ']';
      if (n === null || typeof n !== 'object') return problems.push(at + ': not an object');
      if (n.type === 'text') {
        if (typeof n.text !== 'string') problems.push(at + ': text node without a string');
        if (n.children !== undefined || n.name !== undefined) problems.push(at + ': text node with name/children');
        return undefined;
      }
      if (tags.indexOf(n.name) < 0) problems.push(at + ': tag ' + JSON.stringify(n.name) + ' not allowed');
      Object.keys(n.attrs || {}).forEach(function (k) {
        if (attrs.indexOf(k) < 0) problems.push(at + ': attribute ' + k);
      });
      if (n.children !== undefined) {
        if (!Array.isArray(n.children)) problems.push(at + ': children is not an array');
        else walk(n.children, at + '.' + n.name);
      }
      return undefined;
    });
  })(nodes, 'nodes');
  return problems;
}

/** The HTML the mini program's rich-text would show (text escaped). */
function toHtml(nodes) {
  if (!Array.isArray(nodes)) return '';
  return nodes.map(function (n) {
    if (!n || typeof n !== 'object') return '';
    if (n.type === 'text') return esc(decode(n.text));
    const attrs = Object.keys(n.attrs || {}).map(function (k) {
      return ' ' + k + '="' + esc(n.attrs[k]) + '"';
    }).join('');
    if (n.name === 'br' || n.name === 'hr') return '<' + n.name + attrs + '>';
    return '<' + n.name + attrs + '>' + toHtml(n.children || []) + '</' + n.name + '>';
  }).join('');
}

/** The visible text (newlines for br). */
function toText(nodes) {
  if (!Array.isArray(nodes)) return '';
  return nodes.map(function (n) {
    if (!n || typeof n !== 'object') return '';
    if (n.type === 'text') return decode(n.text);
    if (n.name === 'br') return '\n';
    return toText(n.children || []);
  }).join('');
}

/** Every sup.g-cite: its visible number (without the "," of an adjacent one). */
function supNumbers(nodes) {
  const out = [];
  (function walk(list) {
    (list || []).forEach(function (n) {
      if (!n || typeof n !== 'object' || n.type === 'text') return;
      if (n.name === 'sup' && ((n.attrs || {}).class || '').split(/\s+/).indexOf('g-cite') >= 0) {
        out.push(Number(toText(n.children).replace(/^,/, '')));
        return;
      }
      walk(n.children);
    });
  })(nodes);
  return out;
}

module.exports = { validate, toHtml, toText, supNumbers, esc, decode };
