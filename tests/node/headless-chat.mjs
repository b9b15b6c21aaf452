// A headless AI SDK chat for Node: `ai` only exports AbstractChat (the Chat
// classes live in the framework packages), so we provide a minimal ChatState.
import { AbstractChat, DefaultChatTransport } from 'ai';

/**
 * Plain-object ChatState (see `ChatState` in ai/src/ui/chat.ts). The chat
 * mutates its streaming message in place, so messages are stored as copies:
 * what we read is exactly what the chat last wrote.
 */
export class HeadlessChatState {
  constructor(messages = []) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
  }

  pushMessage = message => {
    this.messages = this.messages.concat(this.snapshot(message));
  };

  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };

  replaceMessage = (index, message) => {
    this.messages = [
      ...this.messages.slice(0, index),
      this.snapshot(message),
      ...this.messages.slice(index + 1),
    ];
  };

  snapshot = value => structuredClone(value);
}

export class HeadlessChat extends AbstractChat {
  constructor({ messages, ...init } = {}) {
    super({ ...init, state: new HeadlessChatState(messages) });
  }
}

/** Base URL of the gateway under test, without a trailing slash. */
export function gatewayUrl() {
  const url = process.env.PERDURE_URL;
  return url ? url.replace(/\/+$/, '') : undefined;
}

/**
 * Create a headless chat talking to `${baseUrl}/api/chat` via DefaultChatTransport.
 * `transport` holds extra DefaultChatTransport options (fetch,
 * resumeStreamIsReplay, prepareReconnectToStreamRequest, headers, ...);
 * everything else goes to the chat (onError, onFinish, messages, ...).
 */
export function createChat(chatId, { baseUrl = gatewayUrl(), transport = {}, ...chatInit } = {}) {
  if (!baseUrl) throw new Error('PERDURE_URL is not set');
  return new HeadlessChat({
    id: chatId,
    transport: new DefaultChatTransport({ api: `${baseUrl}/api/chat`, ...transport }),
    ...chatInit,
  });
}

export const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

/** Poll `predicate` until it returns a truthy value (which is returned). */
export async function waitFor(predicate, { timeout = 10_000, interval = 10, message = 'condition' } = {}) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${message}`);
    await sleep(interval);
  }
}

/** Wait until the chat is no longer busy: status 'ready' or 'error'. */
export async function waitUntilSettled(chat, { timeout = 15_000 } = {}) {
  await waitFor(() => chat.status === 'ready' || chat.status === 'error', {
    timeout,
    message: `chat ${chat.id} to become ready or error (status: ${chat.status})`,
  });
  return chat.status;
}

/** Concatenated text of a UIMessage's text parts. */
export function messageText(message) {
  return (message?.parts ?? [])
    .filter(part => part.type === 'text')
    .map(part => part.text)
    .join('');
}

export function assistantMessages(chat) {
  return chat.messages.filter(message => message.role === 'assistant');
}
