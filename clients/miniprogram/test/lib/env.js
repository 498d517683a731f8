// A DOM for miniprogram-simulate (it renders components into `document`):
// jsdom, installed as the globals j-component uses, then miniprogram-simulate
// itself (which installs the global Component, Behavior and wx).
'use strict';
const path = require('node:path');
const { JSDOM } = require('jsdom');

const dom = new JSDOM('<!doctype html><html><head></head><body></body></html>', {
  pretendToBeVisual: true,
  url: 'https://servicewechat.com/gcite-test/',
});
const win = dom.window;
global.window = win;
global.document = win.document;
// Node has its own Event/CustomEvent/EventTarget; j-component dispatches on
// jsdom elements, so jsdom's classes must win.
for (const name of ['Node', 'Element', 'HTMLElement', 'Event', 'CustomEvent', 'MouseEvent', 'TouchEvent', 'EventTarget', 'DocumentFragment', 'Text']) {
  global[name] = win[name];
}
for (const name of ['getComputedStyle', 'requestAnimationFrame']) {
  if (global[name] === undefined) global[name] = win[name].bind(win);
}

const simulate = require('miniprogram-simulate');

/** Root of the example mini program (what project.config.json's miniprogramRoot names). */
const MINIPROGRAM_ROOT = path.resolve(__dirname, '..', '..', 'example', 'miniprogram');
const COMPONENT = path.join(MINIPROGRAM_ROOT, 'components', 'g-cite-answer', 'index');

module.exports = { simulate, window: win, MINIPROGRAM_ROOT, COMPONENT };
