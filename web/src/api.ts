// The gateway's REST API, as the page uses it. URLs are relative to the page, so the page
// works wherever the gateway serves it.
import type { UIMessage } from 'ai';

import { authorizedFetch } from './auth';

/** What the gateway adds to an assistant message (docs/api.md). */
export type MessageMetadata = {
  submissionId?: string;
  status?: 'completed' | 'aborted' | 'error' | 'streaming' | 'waiting';
  /** What the turn's model calls used (docs/usage.md), once it ended. */
  usage?: Usage;
  /** `budget` when the turn ended on its agent's budget. */
  finishReason?: string;
};

export type Usage = {
  inputTokens: number;
  cachedInputTokens: number;
  outputTokens: number;
  reasoningTokens: number;
  totalTokens: number;
};

export type ChatMessage = UIMessage<MessageMetadata>;

export type StopResult = {
  result: 'stopped' | 'already_finished' | 'nothing_running';
  submissionId: string | null;
  status: string | null;
};

export type Session = {
  id: string;
  title: string;
  agent: string;
  status: 'idle' | 'running' | 'waiting';
  updated_at: string;
  parent_session_id: string | null;
};

export type Sibling = { id: string; role: string; status: string; active: boolean };

export type WaitingCall = { toolCallId: string; toolName: string };
/** An answer to an MCP server's question (an elicitation result, docs/mcp.md#input-required). */
export type InputAction = 'accept' | 'decline' | 'cancel';
export type InputResponse = { action: InputAction; content?: Record<string, unknown> };

/** An error the gateway answered, with its message as the gateway wrote it. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code?: string,
  ) {
    super(message);
  }
}

/**
 * A readable sentence for any error: the gateway's JSON errors (`{"error": {code, message}}`)
 * give their message; the AI SDK passes a failed response's body on as the error's message,
 * so that body is parsed here too.
 */
export function readableError(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } };
    if (typeof body.error?.message === 'string') return body.error.message;
  } catch {
    // Not JSON: a message already meant for people (an `error` chunk's text, a network error).
  }
  if (text === 'Failed to fetch' || text.includes('NetworkError')) {
    return 'The gateway cannot be reached. Is `make run` still running?';
  }
  return text || 'Something went wrong.';
}

async function request<T>(path: string, init?: RequestInit): Promise<T> {
  const response = await authorizedFetch(path, {
    ...init,
    headers: {
      ...(typeof init?.body === 'string' ? { 'content-type': 'application/json' } : {}),
      ...(init?.headers as Record<string, string> | undefined),
    },
  });
  if (!response.ok) {
    const text = await response.text();
    let code: string | undefined;
    try {
      code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
    } catch {
      // A proxy's HTML error page: readableError shows its status instead.
    }
    throw new ApiError(readableError(new Error(text || `HTTP ${response.status}`)), response.status, code);
  }
  return (response.status === 204 ? undefined : await response.json()) as T;
}

const session = (id: string) => `v1/sessions/${encodeURIComponent(id)}`;
const fileUrl = (id: string, path: string) =>
  `${session(id)}/files/${path.split('/').map(encodeURIComponent).join('/')}`;

/** A workspace file as the page shows it. */
export type FileContent = { text: string } | { bytes: number };
const chat = (id: string) => `api/chat/${encodeURIComponent(id)}`;

/** A file of a session's workspace (docs/workspace.md). */
export type WorkspaceFile = { path: string; size: number; version: number };
export type Workspace = { version: number; totalBytes: number; files: WorkspaceFile[] };

export const api = {
  sessions: () => request<{ data: Session[] }>('v1/sessions?limit=200').then(body => body.data),
  rename: (id: string, title: string) =>
    request<Session>(session(id), { method: 'PATCH', body: JSON.stringify({ title }) }),
  remove: (id: string) => request<void>(session(id), { method: 'DELETE' }),

  /** The active branch, including a running turn's partial answer; [] for a chat not begun. */
  messages: (id: string) =>
    request<ChatMessage[]>(`${chat(id)}/messages`).catch((error: unknown) => {
      if (error instanceof ApiError && error.status === 404) return [];
      throw error;
    }),
  /** Stops a turn server-side (useChat's own stop() only disconnects): the one shown, when its
   *  submission is known, so that a stop never reaches a turn queued after it. */
  stop: (id: string, submissionId?: string) =>
    request<StopResult>(
      `${chat(id)}/stop${submissionId ? `?submissionId=${encodeURIComponent(submissionId)}` : ''}`,
      { method: 'POST' },
    ),

  /** A message that joins the running answer at its next step, else is answered next. */
  steer: (id: string, messageId: string, text: string) =>
    request<{ submissionId: string }>(`${session(id)}/submissions`, {
      method: 'POST',
      body: JSON.stringify({
        messages: [{ id: messageId, role: 'user', parts: [{ type: 'text', text }] }],
        concurrency: 'steer',
      }),
    }),

  siblings: (id: string, messageId: string) =>
    request<Sibling[]>(`${session(id)}/messages/${encodeURIComponent(messageId)}/siblings`),
  switchTo: (id: string, messageId: string) =>
    request<unknown>(`${session(id)}/leaf`, { method: 'POST', body: JSON.stringify({ messageId }) }),

  /** The client tool calls the session's turn is parked on. */
  waitingCalls: (id: string) => request<WaitingCall[]>(`${session(id)}/tool-calls`),
  /** Answer an MCP server's questions, one response per question key. */
  answerInput: (id: string, waitId: string, responses: Record<string, InputResponse>) =>
    request<unknown>(`${session(id)}/inputs/${encodeURIComponent(waitId)}`, {
      method: 'POST',
      body: JSON.stringify({ responses }),
    }),
  /** The session's workspace; an empty one for a chat not begun. */
  files: (id: string) =>
    request<Workspace>(`${session(id)}/files`).catch((error: unknown) => {
      if (error instanceof ApiError && error.status === 404) return { version: 0, totalBytes: 0, files: [] };
      throw error;
    }),
  /** A file's content: its text, or how large it is when it is not UTF-8 text. */
  file: async (id: string, path: string): Promise<FileContent> => {
    const response = await authorizedFetch(fileUrl(id, path));
    if (!response.ok) throw new ApiError(readableError(new Error(await response.text())), response.status);
    if (response.headers.get('content-type')?.startsWith('text/')) return { text: await response.text() };
    return { bytes: (await response.arrayBuffer()).byteLength };
  },
  /** Write a file whole, only over `expected` (a version, or `absent`): a `412` otherwise. */
  putFile: (id: string, path: string, content: Blob, expected: number | 'absent') =>
    request<{ path: string; version: number; created: boolean }>(fileUrl(id, path), {
      method: 'PUT',
      body: content,
      headers: {
        'content-type': 'application/octet-stream',
        ...(expected === 'absent' ? { 'if-none-match': '*' } : { 'if-match': `"${expected}"` }),
      },
    }),
  /** Delete the file at `version` only (a `412` when it changed since). */
  deleteFile: (id: string, path: string, version: number) =>
    request<void>(fileUrl(id, path), { method: 'DELETE', headers: { 'if-match': `"${version}"` } }),
  temporalUrl: (id: string, submissionId: string) =>
    request<{ temporalUrl?: string }>(`${session(id)}/submissions/${encodeURIComponent(submissionId)}`).then(
      body => body.temporalUrl,
    ),
};
