// The Markdown renderer of Dify's chat web app (langgenius/webapp-conversation,
// app/components/base/streamdown-markdown.tsx: `<Streamdown>{content}</Streamdown>`, default
// props), bundled for Chromium by esbuild (tests/browser/test_streamdown.py).
// `await window.renderStreamdown(text)` renders one frame and resolves with its HTML and text
// once React has committed it: React's `act` (development build) flushes the effect and the
// transition Streamdown defers each update to, so no frame is read early or late.
import { act, createElement } from 'react'
import { createRoot } from 'react-dom/client'
import { Streamdown } from 'streamdown'

globalThis.IS_REACT_ACT_ENVIRONMENT = true
const host = document.createElement('div')
host.className = 'streamdown-markdown'
document.body.appendChild(host)
const root = createRoot(host)

window.renderStreamdown = async (text) => {
  await act(async () => {
    root.render(createElement(Streamdown, null, text))
  })
  return { html: host.innerHTML, text: host.innerText }
}
