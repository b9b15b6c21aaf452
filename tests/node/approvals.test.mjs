// The AI SDK client (`ai` 6.x) answering a parked Perdure turn in band: tool approval
// (`addToolApprovalResponse` + `sendAutomaticallyWhen`) and a client-side tool
// (`addToolOutput`). The gateway must serve the `approvals` test agent with the fake model.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';

import {
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';

import { assistantMessages, createChat, gatewayUrl, messageText, waitFor } from './headless-chat.mjs';

const TEST_TIMEOUT = 30_000;
const AGENT = { body: { agent: 'approvals' } };

function toolPart(chat, name) {
  const message = chat.lastMessage;
  return message?.role === 'assistant'
    ? message.parts.find(part => part.type === `tool-${name}`)
    : undefined;
}

async function parkedPart(chat, name, state) {
  return waitFor(() => chat.status === 'ready' && toolPart(chat, name)?.state === state && toolPart(chat, name), {
    timeout: 15_000,
    message: `the ${name} call to reach ${state} (status ${chat.status})`,
  });
}

async function answerText(chat, expected) {
  await waitFor(() => chat.status === 'ready' && messageText(chat.lastMessage).includes(expected), {
    timeout: 15_000,
    message: `the answer to include ${JSON.stringify(expected)}: ${messageText(chat.lastMessage)}`,
  });
}

describe('a parked turn answered in band by the AI SDK client', { skip: !gatewayUrl() && 'PERDURE_URL is not set' }, () => {
  test('an approved call runs and the same assistant message goes on', { timeout: TEST_TIMEOUT }, async () => {
    const chat = createChat(`node-approve-${randomUUID()}`, {
      transport: AGENT,
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    await chat.sendMessage({ text: '@tool delete_file {"path": "node-approved.txt"}' });
    const part = await parkedPart(chat, 'delete_file', 'approval-requested');
    const parkedId = chat.lastMessage.id;

    await chat.addToolApprovalResponse({ id: part.approval.id, approved: true });
    await answerText(chat, 'Tool delete_file returned: deleted node-approved.txt');

    assert.equal(chat.error, undefined);
    assert.equal(assistantMessages(chat).length, 1);
    assert.equal(chat.lastMessage.id, parkedId);
    assert.equal(toolPart(chat, 'delete_file').state, 'output-available');
    assert.equal(toolPart(chat, 'delete_file').output, 'deleted node-approved.txt');
  });

  test('a denied call is not run and the model is told why', { timeout: TEST_TIMEOUT }, async () => {
    const chat = createChat(`node-deny-${randomUUID()}`, {
      transport: AGENT,
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    await chat.sendMessage({ text: '@tool delete_file {"path": "node-denied.txt"}' });
    const part = await parkedPart(chat, 'delete_file', 'approval-requested');

    await chat.addToolApprovalResponse({ id: part.approval.id, approved: false, reason: 'keep it' });
    await answerText(chat, 'denied (keep it)');

    assert.equal(chat.error, undefined);
    assert.equal(assistantMessages(chat).length, 1);
    assert.equal(toolPart(chat, 'delete_file').state, 'output-denied');
  });

  test('a client tool output continues the turn', { timeout: TEST_TIMEOUT }, async () => {
    const chat = createChat(`node-client-tool-${randomUUID()}`, {
      transport: AGENT,
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    });
    await chat.sendMessage({ text: '@tool pick_color {"prompt": "your color?"}' });
    const part = await parkedPart(chat, 'pick_color', 'input-available');
    assert.deepEqual(part.input, { prompt: 'your color?' });

    await chat.addToolOutput({ tool: 'pick_color', toolCallId: part.toolCallId, output: 'green' });
    await answerText(chat, 'Tool pick_color returned: green');

    assert.equal(chat.error, undefined);
    assert.equal(assistantMessages(chat).length, 1);
  });
});
