// End-to-end tests of the Perdure gateway with the real AI SDK client
// (`ai` 6.x: AbstractChat + DefaultChatTransport).
//
//   cd tests/node && npm ci && PERDURE_URL=http://127.0.0.1:43123 node --test
//
// The gateway must run with the fake model: `@count N` answers "1 2 … N",
// `@delay MS` waits MS between tokens.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';

import {
  assistantMessages,
  createChat,
  gatewayUrl,
  messageText,
  sleep,
  waitFor,
  waitUntilSettled,
} from './headless-chat.mjs';
import { createTrackingFetch } from './tracking-fetch.mjs';

const BASE = gatewayUrl();
const TEST_TIMEOUT = 30_000;

/** An SSE event id is `<submission id>:<seq>`: it names the turn and the position in it. */
function parseEventId(id) {
  const colon = id?.lastIndexOf(':') ?? -1;
  return { submissionId: id?.slice(0, colon), seq: Number(id?.slice(colon + 1)) };
}

const countText = n => Array.from({ length: n }, (_, i) => String(i + 1)).join(' ');
const FULL_300 = countText(300);

async function getMessages(chatId) {
  const response = await fetch(`${BASE}/api/chat/${encodeURIComponent(chatId)}/messages`);
  assert.equal(response.status, 200, `GET /messages: ${response.status} ${await response.clone().text()}`);
  return response.json();
}

function lastAssistantText(chat) {
  const message = chat.lastMessage;
  return message?.role === 'assistant' ? messageText(message) : '';
}

function textParts(message) {
  return message.parts.filter(part => part.type === 'text');
}

/**
 * Cut `connection` like a network failure, at an SSE event boundary, once the
 * chat has applied every event handed to it (so `lastEventId` is exactly the
 * client's position).
 */
async function dropConnection(chat, connection) {
  connection.pause();
  await waitFor(() => lastAssistantText(chat) === connection.deliveredText, {
    timeout: 5_000,
    message: 'the chat to apply all delivered events',
  });
  await sleep(50); // let non-text chunks (if any) drain as well
  connection.fail();
}

/** Send a slow turn and drop its POST response once some text has arrived. */
async function sendAndDrop(chat, tracker) {
  const sending = chat.sendMessage({ text: '@count 300 @delay 10' });
  await waitFor(() => lastAssistantText(chat) !== '', { message: 'the first text delta' });
  const post = tracker.connections[0];
  assert.equal(post.request.method, 'POST');
  await dropConnection(chat, post);
  await sending;
  await waitUntilSettled(chat);

  // AbstractChat treats a TypeError mentioning "network" as a disconnect and
  // keeps the streaming state around for resumeStream().
  assert.equal(chat.status, 'error');
  assert.match(chat.error?.message ?? '', /network/);
  const partial = lastAssistantText(chat);
  assert.ok(partial.length > 0, 'some text arrived before the drop');
  assert.ok(partial.length < FULL_300.length, 'the drop happened mid-stream');
  assert.ok(FULL_300.startsWith(partial), `partial text is a prefix of the count: ${partial}`);
  return { post, assistantId: chat.lastMessage.id };
}

function assertSingleCompleteAnswer(chat, assistantId, expected) {
  const assistants = assistantMessages(chat);
  assert.equal(assistants.length, 1, `exactly one assistant message, got ${assistants.length}`);
  const [assistant] = assistants;
  assert.equal(assistant.id, assistantId, 'the assistant message keeps its id');
  assert.equal(chat.lastMessage, assistant, 'the assistant message is the last one');
  const parts = textParts(assistant);
  assert.equal(parts.length, 1, `exactly one text part, got ${JSON.stringify(parts)}`);
  assert.equal(messageText(assistant), expected);
}

describe('Perdure gateway through the AI SDK client', {
  skip: BASE ? false : 'PERDURE_URL is not set: start a gateway with the fake model and export PERDURE_URL=http://host:port',
  timeout: 4 * 60_000,
}, () => {
  test('streams an answer through DefaultChatTransport', { timeout: TEST_TIMEOUT }, async () => {
    const chatId = randomUUID();
    const tracker = createTrackingFetch();
    const chat = createChat(chatId, { transport: { fetch: tracker.fetch } });

    await chat.sendMessage({ text: '@count 30' });

    assert.equal(chat.status, 'ready', chat.error?.message);
    assert.equal(chat.error, undefined);
    assert.equal(chat.messages.length, 2);
    const [user, assistant] = chat.messages;
    assert.equal(user.role, 'user');
    assert.equal(assistant.role, 'assistant');
    assert.equal(messageText(assistant), countText(30));

    // Wire format as the gateway contract describes it.
    assert.equal(tracker.connections.length, 1);
    const [connection] = tracker.connections;
    assert.equal(connection.headers.get('x-vercel-ai-ui-message-stream'), 'v1');
    assert.match(connection.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.deepEqual(
      { type: connection.chunks[0]?.type, messageId: connection.chunks[0]?.messageId },
      { type: 'start', messageId: assistant.id },
      'the first chunk is start with the assistant message id',
    );
    assert.ok(connection.sawDone, 'the stream ends with data: [DONE]');
    const submissionId = connection.headers.get('x-perdure-submission-id');
    const ids = connection.events.filter(event => event.data !== '[DONE]').map(event => parseEventId(event.id));
    assert.ok(
      ids.every(id => id.submissionId === submissionId && Number.isInteger(id.seq)),
      `every chunk carries the SSE id ${submissionId}:<seq>: ${JSON.stringify(ids)}`,
    );
    assert.deepEqual(ids.map(id => id.seq), ids.map((_, i) => i), 'the seqs count up from 0');

    // The gateway stores the same conversation, with the same ids.
    const stored = await waitFor(
      async () => {
        const messages = await getMessages(chatId);
        const answer = messages.find(message => message.id === assistant.id);
        return answer && messageText(answer) === countText(30) ? messages : undefined;
      },
      { timeout: 5_000, interval: 50, message: 'the stored assistant message' },
    );
    assert.deepEqual(
      stored.map(message => [message.role, message.id]),
      [
        ['user', user.id],
        ['assistant', assistant.id],
      ],
    );
    assert.equal(messageText(stored[0]), '@count 30');
  });

  test('resumes a dropped stream with a full replay', { timeout: TEST_TIMEOUT }, async () => {
    const chatId = randomUUID();
    const tracker = createTrackingFetch();
    // resumeStreamIsReplay defaults to true: the first `start` chunk of the
    // resumed stream resets the interrupted message, which is then rebuilt.
    const chat = createChat(chatId, { transport: { fetch: tracker.fetch } });

    const { assistantId } = await sendAndDrop(chat, tracker);

    await chat.resumeStream();
    assert.equal(chat.status, 'ready', chat.error?.message);

    const reconnect = tracker.requests.at(-1);
    assert.equal(reconnect.method, 'GET');
    assert.equal(reconnect.url, `${BASE}/api/chat/${encodeURIComponent(chatId)}/stream`);
    assert.equal(reconnect.headers.get('last-event-id'), null);
    assert.equal(reconnect.status, 200);

    const replay = tracker.current;
    assert.notEqual(replay.request, tracker.connections[0].request);
    assert.deepEqual(
      { type: replay.chunks[0]?.type, messageId: replay.chunks[0]?.messageId },
      { type: 'start', messageId: assistantId },
      'the replay starts from the start chunk of the same message',
    );
    assert.equal(replay.deliveredText, FULL_300, 'the replay carries the whole answer');

    assertSingleCompleteAnswer(chat, assistantId, FULL_300);
  });

  test('resumes with Last-Event-ID from where it dropped', { timeout: TEST_TIMEOUT }, async () => {
    const chatId = randomUUID();
    const tracker = createTrackingFetch();
    const chat = createChat(chatId, {
      transport: {
        fetch: tracker.fetch,
        // The resumed stream continues the interrupted message instead of
        // replaying it (needs the same Chat instance after a disconnect).
        resumeStreamIsReplay: false,
        prepareReconnectToStreamRequest: ({ headers }) => ({
          headers:
            tracker.lastEventId === undefined
              ? headers
              : { ...headers, 'Last-Event-ID': tracker.lastEventId },
        }),
      },
    });

    const { post, assistantId } = await sendAndDrop(chat, tracker);
    const cursor = post.lastEventId;
    assert.notEqual(cursor, undefined, 'the dropped stream carried SSE ids');
    const partial = lastAssistantText(chat);

    await chat.resumeStream();
    assert.equal(chat.status, 'ready', chat.error?.message);

    const reconnect = tracker.requests.at(-1);
    assert.equal(reconnect.method, 'GET');
    assert.equal(reconnect.url, `${BASE}/api/chat/${encodeURIComponent(chatId)}/stream`);
    assert.equal(reconnect.headers.get('last-event-id'), cursor);
    assert.equal(reconnect.status, 200);

    const resumed = tracker.current;
    const firstId = resumed.events[0]?.id;
    assert.equal(parseEventId(firstId).submissionId, parseEventId(cursor).submissionId, 'the same turn');
    assert.equal(
      parseEventId(firstId).seq,
      parseEventId(cursor).seq + 1,
      `resumed stream starts right after ${cursor}, got ${firstId}`,
    );
    assert.equal(partial + resumed.deliveredText, FULL_300, 'the resumed stream carries exactly the rest');

    assertSingleCompleteAnswer(chat, assistantId, FULL_300);
  });

  test('stop cancels the turn', { timeout: TEST_TIMEOUT }, async () => {
    const chatId = randomUUID();
    const tracker = createTrackingFetch();
    const chat = createChat(chatId, { transport: { fetch: tracker.fetch } });

    const sending = chat.sendMessage({ text: '@count 300 @delay 10' });
    await waitFor(() => lastAssistantText(chat) !== '', { message: 'the first text delta' });
    const assistantId = chat.lastMessage.id;

    const response = await fetch(`${BASE}/api/chat/${encodeURIComponent(chatId)}/stop`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    assert.ok(response.ok, `POST /stop: ${response.status} ${await response.text()}`);

    await sending;
    await waitUntilSettled(chat);
    assert.equal(chat.status, 'ready', chat.error?.message);

    const [connection] = tracker.connections;
    assert.equal(connection.chunks.at(-1)?.type, 'abort', 'the stream ends with an abort chunk');
    const clientText = lastAssistantText(chat);
    assert.ok(clientText.length > 0, 'some text arrived before the stop');
    assert.ok(clientText.length < FULL_300.length, 'the turn ended before the full answer');
    assert.ok(FULL_300.startsWith(clientText), `client text is a prefix of the count: ${clientText}`);
    assert.equal(assistantMessages(chat).length, 1);

    const storedText = async () => {
      const messages = await getMessages(chatId);
      const assistant = messages.find(message => message.id === assistantId);
      return assistant === undefined ? undefined : messageText(assistant);
    };
    const stored = await waitFor(async () => (await storedText()) || undefined, {
      timeout: 5_000,
      interval: 50,
      message: 'the stored partial assistant message',
    });
    assert.ok(stored.length > 0, 'the partial answer is kept');
    assert.ok(stored.length < FULL_300.length, `stored text is shorter than the full count: ${stored.length}`);
    assert.ok(FULL_300.startsWith(stored), `stored text is a prefix of the count: ${stored}`);

    await sleep(300);
    assert.equal(await storedText(), stored, 'nothing is generated after the stop');
  });

  test('resuming when no turn is active leaves the chat ready', { timeout: TEST_TIMEOUT }, async () => {
    const chatId = randomUUID();
    const tracker = createTrackingFetch();
    const chat = createChat(chatId, { transport: { fetch: tracker.fetch } });

    await chat.sendMessage({ text: 'hello' });
    assert.equal(chat.status, 'ready', chat.error?.message);
    assert.equal(lastAssistantText(chat), 'You said: hello');
    const before = structuredClone(chat.messages);

    // The turn is over once the gateway reports nothing to resume.
    const streamUrl = `${BASE}/api/chat/${encodeURIComponent(chatId)}/stream`;
    await waitFor(
      async () => {
        const response = await fetch(streamUrl);
        await response.body?.cancel();
        return response.status === 204;
      },
      { timeout: 5_000, interval: 50, message: `GET ${streamUrl} to answer 204` },
    );

    await chat.resumeStream();
    assert.equal(tracker.requests.at(-1).status, 204);
    assert.equal(chat.status, 'ready', chat.error?.message);
    assert.deepEqual(chat.messages, before);
  });
});
