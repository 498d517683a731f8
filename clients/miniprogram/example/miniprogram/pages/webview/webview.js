// The <web-view> page: ?url=<encoded http(s) URL> (the component checked it
// with the client's safeUrl and the business-domain list before navigating).
Page({
  data: { url: '' },
  onLoad: function (query) {
    var url = '';
    try {
      url = decodeURIComponent((query && query.url) || '');
    } catch (e) {
      url = '';
    }
    this.setData({ url: /^https?:\/\//i.test(url) ? url : '' });
  },
});
