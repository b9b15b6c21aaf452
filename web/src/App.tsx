// The page: the chats on the left, the open chat on the right. The open chat's id is in the
// address (`?chat=…`), so a reload comes back to it; `?agent=…` picks the agent of new chats.
import { useCallback, useEffect, useState } from 'react';

import { api, readableError, type Session } from './api';
import { forgetKey, storedKey, UNAUTHORIZED_EVENT } from './auth';
import { ChatPanel } from './Chat';
import { FilesPanel } from './FilesPanel';
import { KeyPrompt } from './KeyPrompt';
import { Sessions } from './Sessions';

function newChatId(): string {
  // getRandomValues, not randomUUID: the latter needs a secure context (plain http on a LAN).
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return `chat-${Array.from(bytes, byte => byte.toString(16).padStart(2, '0')).join('')}`;
}

type Address = { chat: string; agent?: string; /** An id made here: no history to load. */ fresh: boolean };

function addressed(): Address {
  const params = new URLSearchParams(location.search);
  const chat = params.get('chat');
  return { chat: chat || newChatId(), agent: params.get('agent') || undefined, fresh: !chat };
}

export function App() {
  const [{ chat, agent, fresh }, setAddress] = useState(addressed);
  const [sessions, setSessions] = useState<Session[]>([]);
  const [problem, setProblem] = useState<string>();
  const [needsKey, setNeedsKey] = useState(false);
  const [filesOpen, setFilesOpen] = useState(false);
  const [openPath, setOpenPath] = useState<string>();
  const [filesVersion, setFilesVersion] = useState(0);

  const open = useCallback((id: string, isNew = false) => {
    const params = new URLSearchParams(location.search);
    params.set('chat', id);
    history.pushState(null, '', `?${params}`);
    setAddress({ ...addressed(), fresh: isNew });
  }, []);

  const refresh = useCallback(() => {
    api.sessions().then(
      // Sub-agent chats are reached from the answer that started them.
      found => setSessions(found.filter(session => !session.parent_session_id)),
      error => setProblem(readableError(error)),
    );
  }, []);

  useEffect(() => {
    const onUnauthorized = () => setNeedsKey(true);
    addEventListener(UNAUTHORIZED_EVENT, onUnauthorized);
    return () => removeEventListener(UNAUTHORIZED_EVENT, onUnauthorized);
  }, []);
  useEffect(() => {
    const onPop = () => setAddress(addressed());
    addEventListener('popstate', onPop);
    addEventListener('focus', refresh);
    return () => {
      removeEventListener('popstate', onPop);
      removeEventListener('focus', refresh);
    };
  }, [refresh]);
  useEffect(refresh, [refresh, chat]);
  // A new chat's id goes into the address at once, so a reload mid-answer finds it.
  useEffect(() => {
    if (!new URLSearchParams(location.search).get('chat')) {
      history.replaceState(null, '', `?${new URLSearchParams({ ...(agent ? { agent } : {}), chat })}`);
    }
  }, [chat, agent]);

  // Another chat's file is not this one's.
  useEffect(() => setOpenPath(undefined), [chat]);
  // Stable: the chat's effects depend on them.
  const onActivity = useCallback(() => {
    refresh();
    setFilesVersion(version => version + 1);
  }, [refresh]);
  const openFile = useCallback((path: string) => {
    setOpenPath(path);
    setFilesOpen(true);
  }, []);

  const current = sessions.find(session => session.id === chat);
  const act = (action: Promise<unknown>) => action.then(refresh, error => setProblem(readableError(error)));

  if (needsKey) return <KeyPrompt />;
  return (
    <div className="app">
      <Sessions
        sessions={sessions}
        current={chat}
        onOpen={open}
        onNew={() => open(newChatId(), true)}
        onRename={(id, title) => void act(api.rename(id, title))}
        onDelete={id => {
          if (id === chat) open(newChatId(), true);
          void act(api.remove(id));
        }}
        onForgetKey={
          storedKey() === null
            ? undefined
            : () => {
                forgetKey();
                location.reload();
              }
        }
      />
      <main className="chat">
        <header>
          <h1>{current?.title || 'New chat'}</h1>
          {current && <span className="agent">agent: {current.agent}</span>}
          <button
            type="button"
            className="link files-toggle"
            aria-pressed={filesOpen}
            onClick={() => setFilesOpen(open => !open)}
          >
            Files
          </button>
        </header>
        {problem && (
          <div className="banner error" role="alert">
            <span>{problem}</span>
            <button type="button" className="link" aria-label="Dismiss" onClick={() => setProblem(undefined)}>
              ×
            </button>
          </div>
        )}
        <ChatPanel
          key={chat}
          chatId={chat}
          fresh={fresh}
          agent={agent}
          onActivity={onActivity}
          onOpenFile={openFile}
        />
      </main>
      {filesOpen && (
        <FilesPanel
          key={chat}
          chatId={chat}
          selected={openPath}
          onSelect={setOpenPath}
          refreshKey={filesVersion}
          onClose={() => setFilesOpen(false)}
        />
      )}
    </div>
  );
}
