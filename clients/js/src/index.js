/**
 * gcite-client: G-Cite citation stream client (ES2017, no dependencies).
 *
 * Contract: ../../../shared/spec/citation-markers.md (markers), the mobile
 * design seed §3-§5 (SSE events, idMap, panel) and Dify's Service API
 * streaming format (docs: ../../shared/reference/dify-protocol.md §1).
 */
export { CitationParser, DEFAULT_MAX_HOLD, citedIds, mergeText, stripMarkers } from './parser.js';
export { FAIL, MATCH, MORE, isEscape, isOpener, matchMarker } from './grammar.js';
export { buildPanel, chunkId, chunkMap, chunksFromRetrieverResources, panelView, urlOf } from './panel.js';
export { SurrogateJoiner, Utf8Decoder, fixSurrogates } from './utf8.js';
export { SseDecoder } from './sse.js';
export { AnswerStream } from './answer.js';
export { streamChat, wxStreamChat } from './transport.js';
export {
  MARKDOWN_OPTIONS,
  MarkdownStream,
  appendTree,
  createMarkdownIt,
  dropDanglingMarker,
  reasoningDisplay,
  renderMarkdownTree,
  safeLink,
  splitReasoning,
  toRichTextNodes,
  treeText,
  treeToHtml,
} from './markdown.js';
export {
  escapeHtml,
  renderPanelHtml,
  renderSegmentsHtml,
  safeUrl,
  subtitleOf,
  titleOf,
} from './render.js';
export {
  NOT_ANSWERED_TEXT,
  WEAK_SUPPORT_TEXT,
  answerNotice,
  answerNoticeText,
  bestSupport,
  chunkSupport,
  hasWeakCitation,
  markWeakCitations,
  supportParts,
  supportDisplay,
  supportSpan,
  verificationOf,
  weakIds,
} from './verification.js';
export { ERROR_SENTENCES, TEXT, UNKNOWN_ERROR, errorText } from './messages.js';
export { copyText, isOfficeUrl, segmentHint, sheetText, sourceRows, sourceSheet, sourceTypeOf } from './sources.js';
