// The example app: nothing global; the chat page reads config.js.
App({});
