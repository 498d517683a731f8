/**
 * What a client says to its user: the one Chinese sentence of every error
 * (errorText) and the Chinese UI strings the H5 page and the mini program
 * share (TEXT). No DOM, no wx, no dependencies, ES2017.
 *
 * The error rule (tests/vectors/error-text.v1.json, shared with the Python
 * client gcite.stream.messages): an error `{code, status, message}` becomes
 * one Chinese sentence chosen by its code, else by its HTTP status. The
 * message (the server's or the model provider's text, often English, with
 * upstream details) is never shown.
 */

/** UI strings shown by more than one client. */
export var TEXT = {
  searching: '正在检索资料…',
  generating: '正在生成回答…',
  stopped: '已停止生成',
  stoppedPartial: '已停止生成，回答不完整',
  empty: '（没有回答内容）',
  incomplete: '回答不完整：连接在回答结束前中断',
  unfinished: '回答未完成：',
  reasoning: '思考过程',
  expand: '展开',
  collapse: '收起',
  retry: '重试',
  regenerate: '重新回答',
  copy: '复制',
  copied: '已复制',
  rag: '知识库',
  web: '公网',
  openOriginal: '完整原文',
  copyLink: '复制链接',
  linkCopied: '链接已复制',
  noContent: '（该来源没有可显示的正文片段）',
  noLink: '该来源没有原文链接',
  badLink: '原文链接不是网页地址，无法打开',
  officeNotice: '原文是 Office / PDF 文件，将下载后打开；如无法预览，可复制链接后在浏览器中查看。',
  webNotice: '该网页的域名不在小程序的业务域名中，无法在小程序内打开；可复制链接后在浏览器中查看。',
  weakLegend: '虚线下划线的角标：该来源未能直接支持所在的句子',
  sources: '来源',
  identitySwitched: '已切换身份：{label}（新对话）',
  close: '关闭',
};

/**
 * The sentence of each error code (Dify's codes, the service's and the
 * transports' own).
 */
export var ERROR_SENTENCES = {
  aborted: '已停止生成',
  network_error: '无法连接服务，请检查网络后重试',
  stream_interrupted: '回答中断，请检查网络后重试',
  timeout: '请求超时，请稍后重试',
  request_timeout: '请求超时，请稍后重试',
  not_event_stream: '服务返回的内容无法识别，请稍后重试',
  frame_too_large: '服务返回的数据异常，请稍后重试',
  stream_error: '回答数据异常，请稍后重试',
  invalid_param: '请求参数有误，请刷新页面后重试',
  bad_request: '请求有误，请刷新页面后重试',
  request_too_large: '问题太长了，请精简后再试',
  unauthorized: 'API Key 无效或无权访问，请检查身份设置',
  forbidden: 'API Key 无效或无权访问，请检查身份设置',
  not_found: '对话不存在或已过期，请开始新对话',
  conversation_not_exists: '对话不存在或已过期，请开始新对话',
  method_not_allowed: '服务不支持此请求，请刷新页面后重试',
  too_many_requests: '请求过于频繁，请稍后再试',
  completion_request_error: '模型服务暂时不可用，请稍后重试',
  provider_not_initialize: '模型服务未配置，请联系管理员',
  provider_quota_exceeded: '模型服务额度已用完，请联系管理员',
  model_currently_not_support: '当前模型不可用，请联系管理员',
  internal_server_error: '服务内部错误，请稍后重试',
  config: '未配置服务地址，请联系管理员',
};

/** The sentence when nothing more is known. */
export var UNKNOWN_ERROR = '出错了，请稍后重试';

function hasOwn(obj, key) {
  return Object.prototype.hasOwnProperty.call(obj, key);
}

/**
 * One Chinese sentence for an error of the client.
 *
 * Order: status 401/403 (the key), 429 (too many requests), the code's
 * sentence (ERROR_SENTENCES), then the status: 5xx "服务暂时不可用…", other
 * 4xx "请求未被接受…", else UNKNOWN_ERROR. `message` is never shown.
 * @param {{code?: string, status?: number, message?: string}|null|undefined} err
 * @returns {string}
 */
export function errorText(err) {
  if (err === null || typeof err !== 'object') return UNKNOWN_ERROR;
  var status = typeof err.status === 'number' && isFinite(err.status) ? err.status : 0;
  var code = typeof err.code === 'string' ? err.code : '';
  if (code === 'aborted') return ERROR_SENTENCES.aborted;
  if (status === 401 || status === 403) return ERROR_SENTENCES.unauthorized;
  if (status === 429) return ERROR_SENTENCES.too_many_requests;
  if (code !== '' && hasOwn(ERROR_SENTENCES, code)) return ERROR_SENTENCES[code];
  if (status >= 500 && status < 600) return '服务暂时不可用，请稍后重试';
  if (status >= 400 && status < 500) return '请求未被接受，请稍后重试';
  return UNKNOWN_ERROR;
}
