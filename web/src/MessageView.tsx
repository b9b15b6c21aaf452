// One message: its parts, its status, and what can be done with it (edit, regenerate,
// switch between branches, open the turn in the Temporal UI).
import { isToolUIPart } from 'ai';
import { useEffect, useState } from 'react';

import { api, type ChatMessage, type Sibling, type Usage } from './api';
import { InputRequest, type InputRequestData } from './InputRequest';
import { Markdown } from './Markdown';
import { ToolPart, type ToolAnswers } from './ToolPart';

export type MessageActions = ToolAnswers & {
  /** Follow the answer on after an MCP server's question was answered out of band. */
  followAnswer: () => void;
  edit: (messageId: string, text: string) => void;
  regenerate: (messageId: string) => void;
  switchTo: (messageId: string) => void;
};

export const messageText = (message: ChatMessage) =>
  message.parts.map(part => (part.type === 'text' ? part.text : '')).join('');

/** The text of a `data-steer` part's message (docs/api.md, "Steering a running turn"). */
export const steerText = (data: unknown) =>
  ((data as { message?: { parts?: { type: string; text?: string }[] } }).message?.parts ?? [])
    .map(part => (part.type === 'text' ? (part.text ?? '') : ''))
    .join('');

const STATUS_LABELS: Record<string, string> = { aborted: 'Stopped', error: 'Failed' };

export function MessageView({
  chatId,
  message,
  idle,
  siblings,
  waitingCalls,
  actions,
}: {
  chatId: string;
  message: ChatMessage;
  /** No turn streams: editing, regenerating and switching are possible. */
  idle: boolean;
  siblings?: Sibling[];
  waitingCalls: ReadonlySet<string>;
  actions: MessageActions;
}) {
  const [editing, setEditing] = useState(false);
  const status = message.metadata?.status;
  return (
    <article className={`message ${message.role}`} data-role={message.role} data-message-id={message.id}>
      {editing ? (
        <EditForm
          text={messageText(message)}
          onCancel={() => setEditing(false)}
          onSave={text => {
            setEditing(false);
            actions.edit(message.id, text);
          }}
        />
      ) : (
        <div className="bubble">
          {message.parts.map((part, index) => {
            if (part.type === 'text') {
              return message.role === 'assistant' ? (
                <Markdown key={index} text={part.text} />
              ) : (
                <p key={index} className="plain">
                  {part.text}
                </p>
              );
            }
            if (part.type === 'reasoning') {
              if (!part.text) return null; // omitted by the model (kept only for its signature)
              return (
                <details key={index} className="reasoning" open={part.state === 'streaming'}>
                  <summary>Reasoning</summary>
                  <p className="plain">{part.text}</p>
                </details>
              );
            }
            if (isToolUIPart(part)) {
              return (
                <ToolPart
                  key={index}
                  part={part}
                  waitsForClient={waitingCalls.has(part.toolCallId)}
                  answers={actions}
                />
              );
            }
            if (part.type === 'file') {
              return (
                <p key={index} className="file">
                  Attached: {part.filename ?? part.mediaType}
                </p>
              );
            }
            if (part.type === 'source-url') {
              return (
                <a key={index} className="source" href={part.url} target="_blank" rel="noopener noreferrer">
                  {part.title ?? part.url}
                </a>
              );
            }
            if (part.type === 'data-steer') {
              // A message sent while the answer worked, shown where it joined the answer.
              return (
                <p key={index} className="plain steer" data-steer-id={part.id}>
                  {steerText(part.data)}
                </p>
              );
            }
            if (part.type === 'data-input-request') {
              return (
                <InputRequest
                  key={index}
                  chatId={chatId}
                  data={part.data as InputRequestData}
                  onAnswered={actions.followAnswer}
                />
              );
            }
            if (part.type === 'data-mcp-task') {
              // An MCP call the server runs as a task: its status as last polled.
              const data = part.data as { server?: string; status?: string; statusMessage?: string };
              return (
                <p key={index} className={`task task-${data.status}`} data-mcp-task={part.id}>
                  {data.server} task {data.status}
                  {data.statusMessage ? `: ${data.statusMessage}` : ''}
                </p>
              );
            }
            if (part.type === 'data-sub-agent') {
              const data = part.data as { agent?: string; sessionId?: string };
              return (
                <a
                  key={index}
                  className="sub-agent"
                  href={`?chat=${encodeURIComponent(data.sessionId ?? '')}`}
                >
                  Sub-agent {data.agent}: open its session
                </a>
              );
            }
            return null;
          })}
          {status && STATUS_LABELS[status] && (
            <p className={`status status-${status}`}>{STATUS_LABELS[status]}</p>
          )}
          {message.role === 'assistant' && message.metadata?.usage && (
            <UsageLine usage={message.metadata.usage} budget={message.metadata.finishReason === 'budget'} />
          )}
        </div>
      )}
      {!editing && (
        <div className="actions">
          {siblings && siblings.length > 1 && (
            <BranchSwitch
              siblings={siblings}
              messageId={message.id}
              disabled={!idle}
              onSwitch={actions.switchTo}
            />
          )}
          {idle && message.role === 'user' && (
            <button type="button" className="link" onClick={() => setEditing(true)}>
              Edit
            </button>
          )}
          {idle && message.role === 'assistant' && (
            <button type="button" className="link" onClick={() => actions.regenerate(message.id)}>
              Regenerate
            </button>
          )}
          {message.role === 'assistant' && message.metadata?.submissionId && (
            <TemporalLink chatId={chatId} submissionId={message.metadata.submissionId} />
          )}
        </div>
      )}
    </article>
  );
}

const count = (tokens: number) => tokens.toLocaleString('en-US');

/** What the turn used, under its answer: tokens in (cached) and out (reasoning). */
function UsageLine({ usage, budget }: { usage: Usage; budget: boolean }) {
  const cached = usage.cachedInputTokens ? ` (${count(usage.cachedInputTokens)} cached)` : '';
  const reasoning = usage.reasoningTokens ? ` (${count(usage.reasoningTokens)} reasoning)` : '';
  return (
    <p className="usage">
      {count(usage.totalTokens)} tokens: {count(usage.inputTokens)} in{cached}, {count(usage.outputTokens)}{' '}
      out
      {reasoning}
      {budget && ' · the turn used its budget'}
    </p>
  );
}

function EditForm({
  text,
  onSave,
  onCancel,
}: {
  text: string;
  onSave: (text: string) => void;
  onCancel: () => void;
}) {
  const [draft, setDraft] = useState(text);
  return (
    <form
      className="edit"
      onSubmit={event => {
        event.preventDefault();
        if (draft.trim()) onSave(draft);
      }}
    >
      <textarea
        aria-label="Edit message"
        value={draft}
        autoFocus
        rows={3}
        onChange={event => setDraft(event.target.value)}
      />
      <div className="edit-buttons">
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" className="primary">
          Send edit
        </button>
      </div>
    </form>
  );
}

/** ‹ 2 / 3 ›: the message's alternatives (edits of a user message, regenerated answers). */
function BranchSwitch({
  siblings,
  messageId,
  disabled,
  onSwitch,
}: {
  siblings: Sibling[];
  messageId: string;
  disabled: boolean;
  onSwitch: (messageId: string) => void;
}) {
  // The client may still hold an edited message under the id it was edited from: the active
  // sibling is the one shown.
  const active = siblings.findIndex(sibling => sibling.active);
  const shown = active >= 0 ? active : siblings.findIndex(sibling => sibling.id === messageId);
  const go = (index: number) => onSwitch(siblings[index].id);
  return (
    <span className="branches" aria-label="Branches">
      <button
        type="button"
        className="link"
        aria-label="Previous branch"
        disabled={disabled || shown <= 0}
        onClick={() => go(shown - 1)}
      >
        ‹
      </button>
      <span className="branch-count">
        {shown + 1} / {siblings.length}
      </span>
      <button
        type="button"
        className="link"
        aria-label="Next branch"
        disabled={disabled || shown >= siblings.length - 1}
        onClick={() => go(shown + 1)}
      >
        ›
      </button>
    </span>
  );
}

const temporalUrls = new Map<string, Promise<string | undefined>>();

/** The turn's workflow in the Temporal UI, from the submission's `temporalUrl`. */
function TemporalLink({ chatId, submissionId }: { chatId: string; submissionId: string }) {
  const [url, setUrl] = useState<string>();
  useEffect(() => {
    let current = true;
    let lookup = temporalUrls.get(submissionId);
    if (!lookup) {
      lookup = api.temporalUrl(chatId, submissionId).catch(() => {
        temporalUrls.delete(submissionId); // asked again next time
        return undefined;
      });
      temporalUrls.set(submissionId, lookup);
    }
    void lookup.then(found => current && setUrl(found));
    return () => {
      current = false;
    };
  }, [chatId, submissionId]);
  if (!url) return null;
  return (
    <a
      className="link temporal"
      href={url}
      target="_blank"
      rel="noopener noreferrer"
      title="This turn's workflow in the Temporal UI"
    >
      Temporal
    </a>
  );
}
