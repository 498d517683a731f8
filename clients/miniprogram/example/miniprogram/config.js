/**
 * Configuration of the example (edit before opening in WeChat DevTools).
 *
 * serviceUrl       the gcite service: `gcite demo` listens on http://127.0.0.1:8000
 *                  (in DevTools, tick "不校验合法域名"); in production an https
 *                  domain listed in the mini program's request legal domains.
 * identities       the identity picker: each label sends its key as
 *                  "Authorization: Bearer <key>"; the service binds keys to roles.
 *                  These are the keys of `gcite demo` (sample_data/demo.toml).
 * loadPageConfig   true: replace title, suggestions and identities by the
 *                  service's GET /page-config.json when it answers.
 * webViewPage      the page with <web-view> that opens an original page.
 * webViewDomains   the business domains (业务域名) of your mini program; a link
 *                  on another host is offered as "复制链接" instead.
 */
module.exports = {
  serviceUrl: 'http://127.0.0.1:8000',
  title: 'G-Cite 示例',
  suggestions: ['夜间巡更要打卡多少个点位？', '干粉灭火器怎么用？'],
  identities: [
    { label: '访客', key: 'demo-visitor' },
    { label: '运维工程师', key: 'demo-ops' },
    { label: '安保主管', key: 'demo-security' },
  ],
  loadPageConfig: true,
  webViewPage: '/pages/webview/webview',
  webViewDomains: [],
};
