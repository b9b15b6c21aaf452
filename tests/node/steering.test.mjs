// Steering through the AI SDK client (`ai` 6.x): while a chat streams an answer that runs a
// tool, a second request through the same transport, with `concurrency: 'steer'`, joins that
// answer at its next step; the chat shows the message as a `data-steer` part where it joined.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';

import { DefaultChatTransport } from 'ai';

import { createChat, gatewayUrl, messageText, waitFor, waitUntilSettled } from './headless-chat.mjs';

const TEST_TIMEOUT = 30_000;
const BASE = gatewayUrl();

async function readAll(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

describe('steering through the AI SDK client', { skip: !BASE && 'PERDURE_URL is not set' }, () => {
  test('a steering message joins the streaming answer at its next step', { timeout: TEST_TIMEOUT }, async () => {
    const chatId = `node-steer-${randomUUID()}`;
    const chat = createChat(chatId);
    const answering = chat.sendMessage({ text: '@tool wait {"seconds": 3}' });
    await waitFor(() => chat.lastMessage?.parts.some(part => part.type === 'tool-wait'), {
      message: 'the tool call',
    });

    const transport = new DefaultChatTransport({ api: `${BASE}/api/chat` });
    const steering = { id: `steer-${randomUUID()}`, role: 'user', parts: [{ type: 'text', text: '@count 3 steered' }] };
    const own = await readAll(
      await transport.sendMessages({
        chatId,
        messages: [...chat.messages.slice(0, 1), steering],
        trigger: 'submit-message',
        messageId: undefined,
        abortSignal: undefined,
        body: { concurrency: 'steer' },
      }),
    );
    await answering;

    assert.equal(await waitUntilSettled(chat), 'ready', chat.error?.message);
    const answer = chat.lastMessage;
    const joined = answer.parts.filter(part => part.type === 'data-steer');
    assert.deepEqual(
      joined.map(part => [part.id, part.data.message.parts[0].text]),
      [[steering.id, '@count 3 steered']],
    );
    const types = answer.parts.map(part => part.type);
    assert.ok(types.indexOf('tool-wait') < types.indexOf('data-steer'), types.join(' '));
    assert.equal(messageText(answer), '1 2 3');
    // Its own stream says where it went.
    const last = own.at(-1);
    assert.equal(last.type, 'abort');
    assert.match(last.reason ?? '', /^joined the running turn of submission /);
  });
});
