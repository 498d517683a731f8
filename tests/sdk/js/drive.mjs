// Play the conformance scenario with npm `dify-client` (Dify's official Node SDK) and
// npm `dify-ai-provider` with the Vercel AI SDK (`ai`), against gcite's service.
//
// Run by tests/sdk/test_js_sdks.py with GCITE_SDK_URL (http://127.0.0.1:PORT/v1),
// GCITE_SDK_KEY and GCITE_SDK_USER. Same protocol as tests/sdk/python/scenario.py:
// one JSON line per step, {"step", "ok", "error", "data"}; a failing step is
// reported and the next steps still run. The SDK has no call for stop and suggested
// questions: those use its own sendRequest.
import { ChatClient } from "dify-client";
import { createDifyProvider } from "dify-ai-provider";
import { generateText, streamText } from "ai";

const CITE_QUERY = "访客登记在哪里办理？";
const FOLLOW_QUERY = "临时门禁卡什么时候归还？";
const SLOW_QUERY = "请慢慢介绍访客停车规定";

const baseUrl = process.env.GCITE_SDK_URL;
const key = process.env.GCITE_SDK_KEY;
const user = process.env.GCITE_SDK_USER || "sdk-user";
const client = new ChatClient(key, baseUrl);

function emit(step, ok, data, error = "") {
  process.stdout.write(JSON.stringify({ step, ok, error, data: data ?? null }) + "\n");
}

async function run(step, action) {
  try {
    const data = await action();
    emit(step, true, data);
    return data;
  } catch (err) {
    const body = err?.response?.data;
    const detail = body && typeof body === "object" && !body.pipe ? ` ${JSON.stringify(body)}` : "";
    emit(step, false, null, `${err?.name || "Error"}: ${err?.message || err}${detail}`.slice(0, 2000));
    return null;
  }
}

// The SDK hands back axios' Node stream; read its SSE frames.
async function* sseEvents(stream) {
  let buffer = "";
  const decoder = new TextDecoder();
  for await (const chunk of stream) {
    buffer += decoder.decode(chunk, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of frame.split("\n")) {
        if (line.startsWith("data:")) yield JSON.parse(line.slice(5).trim());
        else if (line.startsWith("event:")) yield { event: line.slice(6).trim() };
      }
    }
  }
}

async function chatStream(query, conversationId) {
  const response = await client.createChatMessage({}, query, user, true, conversationId || null);
  const out = { events: [], answer: "" };
  for await (const event of sseEvents(response.data)) {
    out.events.push(event.event);
    if (event.event === "message") out.answer += event.answer;
    if (event.event === "message_end") {
      out.retriever_resources = event.metadata.retriever_resources;
      out.usage = event.metadata.usage;
      out.message_id = event.message_id;
      out.conversation_id = event.conversation_id;
    }
    out.task_id = out.task_id || event.task_id;
  }
  return out;
}

async function chatBlocking(query) {
  const { data } = await client.createChatMessage({}, query, user, false);
  return {
    answer: data.answer,
    message_id: data.message_id,
    conversation_id: data.conversation_id,
    mode: data.mode,
    retriever_resources: data.metadata.retriever_resources,
    usage: data.metadata.usage,
  };
}

async function chatAndStop(query) {
  const response = await client.createChatMessage({}, query, user, true);
  const out = { events: [] };
  for await (const event of sseEvents(response.data)) {
    out.events.push(event.event);
    if (event.event === "message" && !out.stop) {
      out.conversation_id = event.conversation_id;
      const stop = await client.sendRequest("POST", `/chat-messages/${event.task_id}/stop`, { user });
      out.stop = stop.data;
    }
  }
  return out;
}

async function upload() {
  const form = new FormData();
  form.append("file", new Blob(["访客须知"], { type: "text/plain" }), "notes.txt");
  form.append("user", user);
  try {
    const { status, data } = await client.fileUpload(form);
    return { status, body: data };
  } catch (err) {
    if (!err.response) throw err;
    return { status: err.response.status, body: err.response.data };
  }
}

async function main() {
  await run("parameters", async () => (await client.getApplicationParameters(user)).data);
  const first = await run("chat_stream", () => chatStream(CITE_QUERY, ""));
  const conversation = first?.conversation_id || "";
  const message = first?.message_id || "";
  await run("follow_up", () => chatStream(FOLLOW_QUERY, conversation));
  await run("chat_blocking", () => chatBlocking(CITE_QUERY));
  const stopped = await run("stop", () => chatAndStop(SLOW_QUERY));
  await run("conversations", async () => (await client.getConversations(user, null, 100)).data);
  await run("messages", async () => (await client.getConversationMessages(user, conversation)).data);
  await run("feedback", async () => (await client.messageFeedback(message, "like", user)).data);
  await run("messages_after_feedback", async () => (await client.getConversationMessages(user, conversation)).data);
  await run("suggested", async () =>
    (await client.sendRequest("GET", `/messages/${message}/suggested`, null, { user })).data);
  await run("rename", async () => (await client.renameConversation(conversation, "访客问答", user, false)).data);
  await run("rename_auto", async () => (await client.renameConversation(conversation, "", user, true)).data);
  const other = stopped?.conversation_id || "";
  await run("delete", async () => {
    const response = await client.deleteConversation(other, user);
    return { status: response.status, body: response.data };
  });
  await run("conversations_after_delete", async () => (await client.getConversations(user, null, 100)).data);
  await run("upload", upload);

  // Vercel AI SDK through dify-ai-provider: the usage it reports comes from Dify's events.
  const dify = createDifyProvider({ baseURL: baseUrl });
  const model = dify("gcite", { apiKey: key, logger: false });
  const headers = { "user-id": `${user}-ai` };
  await run("ai_stream_text", async () => {
    const result = streamText({ model, prompt: CITE_QUERY, headers });
    let text = "";
    for await (const delta of result.textStream) text += delta;
    const usage = await result.usage;
    const sources = await result.sources;
    return { text, usage, sources: sources.length, finishReason: await result.finishReason };
  });
  await run("ai_generate_text", async () => {
    const result = await generateText({ model, prompt: CITE_QUERY, headers });
    return { text: result.text, usage: result.usage, finishReason: result.finishReason };
  });
}

await main();
