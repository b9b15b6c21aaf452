// The AI SDK client (`ai` 6.x) regenerating an answer and editing a user message: each makes a
// new branch on the server (nothing is deleted), and the history follows it.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';

import { assistantMessages, createChat, gatewayUrl, messageText, waitUntilSettled } from './headless-chat.mjs';

const TEST_TIMEOUT = 30_000;
const BASE = gatewayUrl();

async function serverHistory(chatId) {
  const response = await fetch(`${BASE}/api/chat/${encodeURIComponent(chatId)}/messages`);
  assert.equal(response.status, 200);
  return response.json();
}

describe('branches through the AI SDK client', { skip: !BASE && 'PERDURE_URL is not set' }, () => {
  test('regenerate answers the same message again, as a new branch', { timeout: TEST_TIMEOUT }, async () => {
    const chatId = `node-regenerate-${randomUUID()}`;
    const chat = createChat(chatId);
    await chat.sendMessage({ text: '@count 3 regenerate me' });
    assert.equal(await waitUntilSettled(chat), 'ready');
    const firstId = chat.lastMessage.id;

    await chat.regenerate();
    assert.equal(await waitUntilSettled(chat), 'ready');

    assert.equal(chat.error, undefined);
    assert.equal(assistantMessages(chat).length, 1);
    assert.notEqual(chat.lastMessage.id, firstId);
    assert.equal(messageText(chat.lastMessage), '1 2 3');
    const history = await serverHistory(chatId);
    assert.deepEqual(history.map(m => m.id), [chat.messages[0].id, chat.lastMessage.id]);
  });

  test('editing a user message answers the edit, as a new branch', { timeout: TEST_TIMEOUT }, async () => {
    const chatId = `node-edit-${randomUUID()}`;
    const chat = createChat(chatId);
    await chat.sendMessage({ text: '@count 2 before the edit' });
    assert.equal(await waitUntilSettled(chat), 'ready');
    const userId = chat.messages[0].id;

    await chat.sendMessage({ text: '@count 4 after the edit', messageId: userId });
    assert.equal(await waitUntilSettled(chat), 'ready');

    assert.equal(chat.error, undefined);
    assert.equal(chat.messages.length, 2);
    assert.equal(messageText(chat.lastMessage), '1 2 3 4');
    const history = await serverHistory(chatId);
    assert.equal(history.length, 2);
    assert.ok(history[0].id.startsWith(`${userId}.edit-`), history[0].id);
    assert.equal(history[0].parts[0].text, '@count 4 after the edit');
  });
});
