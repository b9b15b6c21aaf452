// One chat: its history from the gateway, then the AI SDK's useChat for everything live
// (send, stream, resume after a reload, approvals, client tool outputs, regenerate, edit).
import { Chat, useChat } from '@ai-sdk/react';
import {
  DefaultChatTransport,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';
import { useCallback, useEffect, useRef, useState, type FormEvent, type KeyboardEvent } from 'react';

import { api, readableError, type ChatMessage, type Sibling } from './api';
import { authorizedFetch } from './auth';
import { isPendingQuestion } from './InputRequest';
import { MessageView, messageText, type MessageActions } from './MessageView';

type Recovery = { attempt: number; maxAttempts: number; textAtNotice: number };

/** A message sent while an answer streams (docs/api.md, "Steering a running turn"). */
type Steering = { id: string; text: string };

/** Those not shown yet: neither joined to an answer (a `data-steer` part) nor a turn's own. */
function unjoined(messages: ChatMessage[], steering: Steering[]): Steering[] {
  const shown = new Set<string>();
  for (const message of messages) {
    if (message.role === 'user') shown.add(message.id);
    for (const part of message.parts) {
      if (part.type === 'data-steer' && part.id) shown.add(part.id);
    }
  }
  return steering.filter(each => !shown.has(each.id));
}

const newMessageId = () => `steer-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;

const STOP_GRACE_MS = 5000;

const isBusy = (status: string) => status === 'submitted' || status === 'streaming';

/** The history first: useChat then starts from it, and resumes a turn that is still running. */
export function ChatPanel({
  chatId,
  fresh,
  agent,
  onActivity,
  onOpenFile,
}: {
  chatId: string;
  fresh: boolean;
  agent?: string;
  onActivity: () => void;
  onOpenFile: (path: string) => void;
}) {
  const [initial, setInitial] = useState<ChatMessage[] | undefined>(fresh ? [] : undefined);
  const [loadError, setLoadError] = useState<string>();
  useEffect(() => {
    if (fresh) return;
    let current = true;
    api.messages(chatId).then(
      messages => current && setInitial(messages),
      error => current && setLoadError(readableError(error)),
    );
    return () => {
      current = false;
    };
  }, [chatId, fresh]);
  if (loadError) return <p className="banner error">{loadError}</p>;
  if (!initial) return <p className="loading">Loading…</p>;
  return (
    <Conversation
      chatId={chatId}
      agent={agent}
      initial={initial}
      onActivity={onActivity}
      onOpenFile={onOpenFile}
    />
  );
}

function Conversation({
  chatId,
  agent,
  initial,
  onActivity,
  onOpenFile,
}: {
  chatId: string;
  agent?: string;
  initial: ChatMessage[];
  onActivity: () => void;
  onOpenFile: (path: string) => void;
}) {
  const [notice, setNotice] = useState<string>();
  const [recovery, setRecovery] = useState<Recovery>();
  const [stopping, setStopping] = useState(false);
  const [branchVersion, setBranchVersion] = useState(0);
  const [steering, setSteering] = useState<Steering[]>([]);
  const steeringRef = useRef(steering);
  steeringRef.current = steering;
  const branchChanged = useRef(false);
  // The stock condition for client tool outputs also holds after a turn that ended with tool
  // results (stopped, say): only a continuation the user just answered is sent.
  const answeredClientCall = useRef(false);
  const events = useRef<{ finished: (finishReason?: string, disconnected?: boolean) => void }>(null);

  const [chat] = useState(
    () =>
      new Chat<ChatMessage>({
        id: chatId,
        messages: initial,
        // The reconnect URL is `${api}/${chatId}/stream`: the gateway's resume endpoint.
        transport: new DefaultChatTransport({
          api: 'api/chat',
          body: agent ? { agent } : undefined,
          fetch: authorizedFetch,
        }),
        sendAutomaticallyWhen: options =>
          lastAssistantMessageIsCompleteWithApprovalResponses(options) ||
          (answeredClientCall.current && lastAssistantMessageIsCompleteWithToolCalls(options)),
        onData: part => {
          if (part.type === 'data-recovery') {
            const data = part.data as { attempt: number; maxAttempts: number };
            setRecovery({ ...data, textAtNotice: answerLength(chat.lastMessage) });
          }
        },
        onFinish: ({ finishReason, isDisconnect }) => events.current?.finished(finishReason, isDisconnect),
      }),
  );
  // Resume only a chat that exists: the gateway answers 404 for one not begun.
  const { messages, status, error, clearError } = useChat({ chat, resume: initial.length > 0 });
  const busy = isBusy(status);

  /** The gateway's copy of the active branch: ids of edits, statuses of stopped answers.
   *  `untilEnded`: wait for a stopped turn's answer to be stored, a moment after the stop. */
  const sync = useCallback(
    async (untilEnded = false) => {
      const before = chat.messages;
      try {
        let stored = await api.messages(chatId);
        for (const deadline = Date.now() + STOP_GRACE_MS; untilEnded && unfinished(stored.at(-1));) {
          if (Date.now() > deadline) break;
          await sleep(100);
          stored = await api.messages(chatId);
        }
        // Never overwrite a message sent meanwhile.
        if (chat.messages === before && !isBusy(chat.status)) chat.messages = stored;
      } catch (failure) {
        setNotice(readableError(failure));
      }
      if (branchChanged.current) {
        branchChanged.current = false;
        setBranchVersion(version => version + 1);
      }
    },
    [chat, chatId],
  );

  /** After an answer ended: steering messages it did not take are the next turn; follow it. */
  const followSteering = useCallback(
    async (synced: Promise<void>) => {
      const next = unjoined(chat.messages, steeringRef.current).length > 0;
      await synced;
      if (next && !isBusy(chat.status)) await chat.resumeStream();
    },
    [chat],
  );

  events.current = {
    finished: (finishReason, disconnected) => {
      answeredClientCall.current = false;
      onActivity();
      // A parked turn goes on in the same message: the client's copy is the one to answer in.
      if (!disconnected && finishReason !== 'tool-calls') void followSteering(sync());
    },
  };

  const steer = (text: string) => {
    const id = newMessageId();
    setSteering(list => [...list, { id, text }]);
    api.steer(chatId, id, text).catch((failure: unknown) => {
      setNotice(readableError(failure));
      setSteering(list => list.filter(each => each.id !== id));
    });
  };
  const waitingSteers = unjoined(messages, steering);

  useEffect(() => {
    if (status === 'submitted') {
      setRecovery(undefined);
      setNotice(undefined);
    }
    // Streaming: the gateway has the chat now (a new one joins the list, titled).
    if (status === 'streaming') onActivity();
  }, [status, onActivity]);

  const waitingCalls = useWaitingClientCalls(chatId, status === 'ready' ? messages : undefined);
  const siblings = useSiblings(chatId, busy ? undefined : messages, branchVersion);
  const last = messages.at(-1);
  const parked =
    (!busy &&
      last?.role === 'assistant' &&
      last.parts.some(
        part =>
          isToolUIPart(part) &&
          (part.state === 'approval-requested' ||
            (part.state === 'input-available' && waitingCalls.has(part.toolCallId))),
      )) ||
    (!busy && !!last?.parts.some(isPendingQuestion));

  const stopTurn = async () => {
    setStopping(true);
    try {
      const shown = chat.messages[chat.messages.length - 1];
      const { result } = await api.stop(
        chatId,
        shown?.role === 'assistant' ? shown.metadata?.submissionId : undefined,
      );
      // A stopped turn's stream ends by itself with `abort`, its partial answer kept.
      if (result === 'stopped' && isBusy(chat.status)) await until(() => !isBusy(chat.status), STOP_GRACE_MS);
    } catch (failure) {
      setNotice(readableError(failure));
    } finally {
      if (isBusy(chat.status)) await chat.stop();
      // A parked turn has no stream to follow: its stored answer says how it ended.
      await followSteering(sync(true));
      setStopping(false);
    }
  };

  const actions: MessageActions = {
    openFile: onOpenFile,
    approve: (id, approved, reason) => void chat.addToolApprovalResponse({ id, approved, reason }),
    // A turn that ended before the resume has no stream left (a 204): its stored answer does.
    followAnswer: () => void chat.resumeStream().then(() => sync()),
    output: (tool, toolCallId, answer) => {
      answeredClientCall.current = true;
      void chat.addToolOutput(
        'errorText' in answer
          ? { state: 'output-error', tool, toolCallId, errorText: answer.errorText }
          : { tool, toolCallId, output: answer.output },
      );
    },
    edit: (messageId, text) => {
      branchChanged.current = true;
      void chat.sendMessage({ text, messageId });
    },
    regenerate: messageId => {
      branchChanged.current = true;
      void chat.regenerate({ messageId });
    },
    switchTo: messageId => {
      api.switchTo(chatId, messageId).then(
        () => {
          branchChanged.current = true;
          return sync();
        },
        failure => setNotice(readableError(failure)),
      );
    },
  };

  // The notice says "recovering" until the answer grows again.
  const recovered = recovery && answerLength(last) > recovery.textAtNotice;
  const recovering = recovery && busy && !recovered;
  const problem = notice ?? (error ? readableError(error) : undefined);

  return (
    <>
      <Messages messages={messages} busy={busy}>
        {messages.map(message => (
          <MessageView
            key={message.id}
            chatId={chatId}
            message={message}
            idle={!busy && !parked}
            siblings={siblings.get(message.id)}
            waitingCalls={waitingCalls}
            actions={actions}
          />
        ))}
        {waitingSteers.map(each => (
          <p key={each.id} className="plain steer pending" data-steer-pending={each.id}>
            {each.text}
            <small>joins the answer at its next step</small>
          </p>
        ))}
        {status === 'submitted' && <p className="thinking">Thinking…</p>}
        {recovering && (
          <p className="banner recovery" role="status">
            The model failed; recovering (attempt {recovery.attempt} of {recovery.maxAttempts})…
          </p>
        )}
        {recovered && (
          <p className="banner recovered" role="status">
            Recovered from a model failure (attempt {recovery.attempt} of {recovery.maxAttempts}).
          </p>
        )}
      </Messages>
      {problem && (
        <div className="banner error" role="alert">
          <span>{problem}</span>
          <button
            type="button"
            className="link"
            aria-label="Dismiss"
            onClick={() => {
              setNotice(undefined);
              clearError();
            }}
          >
            ×
          </button>
        </div>
      )}
      <Composer
        busy={busy}
        parked={parked}
        stopping={stopping}
        onSend={text => void chat.sendMessage({ text })}
        onSteer={steer}
        onStop={() => void stopTurn()}
      />
    </>
  );
}

/** The text of an answer so far (0 while the answer has not begun: a retry). */
const answerLength = (message: ChatMessage | undefined) =>
  message?.role === 'assistant' ? messageText(message).length : 0;

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

async function until(condition: () => boolean, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (!condition() && Date.now() < deadline) await sleep(50);
}

/** A running turn's partial answer, as the history shows it. */
const unfinished = (message: ChatMessage | undefined) =>
  message?.role === 'assistant' && ['streaming', 'waiting'].includes(message.metadata?.status ?? '');

/** The scrolling list; it follows a growing answer unless the reader scrolled up. */
function Messages({
  messages,
  busy,
  children,
}: {
  messages: ChatMessage[];
  busy: boolean;
  children: React.ReactNode;
}) {
  const ref = useRef<HTMLDivElement>(null);
  const following = useRef(true);
  useEffect(() => {
    const element = ref.current;
    if (element && following.current) element.scrollTop = element.scrollHeight;
  });
  return (
    <div
      className="messages"
      ref={ref}
      data-busy={busy}
      onScroll={event => {
        const element = event.currentTarget;
        following.current = element.scrollHeight - element.scrollTop - element.clientHeight < 80;
      }}
    >
      {messages.length === 0 ? (
        <div className="empty">
          <h2>Start a conversation</h2>
          <p>
            Answers stream as they are written. Reload or close the tab mid-answer: it goes on, and you pick
            it up where it is.
          </p>
        </div>
      ) : (
        children
      )}
    </div>
  );
}

function Composer({
  busy,
  parked,
  stopping,
  onSend,
  onSteer,
  onStop,
}: {
  busy: boolean;
  parked: boolean;
  stopping: boolean;
  onSend: (text: string) => void;
  /** While an answer streams, a message steers it. */
  onSteer: (text: string) => void;
  onStop: () => void;
}) {
  const [text, setText] = useState('');
  const send = (event?: FormEvent) => {
    event?.preventDefault();
    if (!text.trim() || parked || stopping) return;
    (busy ? onSteer : onSend)(text);
    setText('');
  };
  const onKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.nativeEvent.isComposing) send(event);
  };
  return (
    <form className="composer" onSubmit={send}>
      {parked && (
        <p className="hint">
          The answer waits for you above: approve, deny or answer the tool call, or stop the turn.
        </p>
      )}
      <div className="composer-row">
        <textarea
          aria-label="Message"
          placeholder={busy && !parked ? 'Steer the answer: it reads this at its next step' : 'Message'}
          rows={1}
          value={text}
          onChange={event => setText(event.target.value)}
          onKeyDown={onKeyDown}
        />
        {busy && !parked && (
          <button type="submit" className="primary" disabled={!text.trim() || stopping}>
            Steer
          </button>
        )}
        {busy || parked ? (
          <button type="button" className="stop" onClick={onStop} disabled={stopping}>
            {stopping ? 'Stopping…' : 'Stop'}
          </button>
        ) : (
          <button type="submit" className="primary" disabled={!text.trim()}>
            Send
          </button>
        )}
      </div>
    </form>
  );
}

/** The client tool calls the parked turn waits on (only those get an output form). */
function useWaitingClientCalls(chatId: string, settled: ChatMessage[] | undefined): ReadonlySet<string> {
  const last = settled?.at(-1);
  const open =
    last?.role === 'assistant'
      ? last.parts
          .filter(part => isToolUIPart(part) && part.state === 'input-available')
          .map(part => (isToolUIPart(part) ? part.toolCallId : ''))
          .join(' ')
      : '';
  const [calls, setCalls] = useState<ReadonlySet<string>>(new Set());
  useEffect(() => {
    if (!open) {
      setCalls(new Set());
      return;
    }
    let current = true;
    api.waitingCalls(chatId).then(
      found => current && setCalls(new Set(found.map(call => call.toolCallId))),
      () => current && setCalls(new Set()),
    );
    return () => {
      current = false;
    };
  }, [chatId, open]);
  return calls;
}

/** Each shown message's alternatives, asked for once per message and branch change. */
function useSiblings(
  chatId: string,
  settled: ChatMessage[] | undefined,
  version: number,
): Map<string, Sibling[]> {
  const [known, setKnown] = useState({ version, byId: new Map<string, Sibling[]>() });
  const asked = useRef(new Set<string>());
  const missing = JSON.stringify(
    (settled ?? []).map(message => message.id).filter(id => !asked.current.has(`${version}:${id}`)),
  );
  useEffect(() => {
    const ids = JSON.parse(missing) as string[];
    if (ids.length === 0) return;
    for (const id of ids) asked.current.add(`${version}:${id}`);
    const lookups = ids.map(id =>
      api.siblings(chatId, id).then(
        found => [id, found] as const,
        () => undefined,
      ),
    );
    void Promise.all(lookups).then(results =>
      setKnown(previous => {
        if (version < previous.version) return previous;
        // A branch change makes every list stale: the new version's lists replace them.
        const byId = new Map(version === previous.version ? previous.byId : undefined);
        for (const result of results) if (result) byId.set(result[0], result[1]);
        return { version, byId };
      }),
    );
  }, [chatId, version, missing]);
  return known.byId;
}
