// The sidebar: the tenant's chats, most recently active first; new, rename, delete.
import { useState, type FormEvent } from 'react';

import type { Session } from './api';

export function Sessions({
  sessions,
  current,
  onOpen,
  onNew,
  onRename,
  onDelete,
  onForgetKey,
}: {
  sessions: Session[];
  current: string;
  onOpen: (id: string) => void;
  onNew: () => void;
  onRename: (id: string, title: string) => void;
  onDelete: (id: string) => void;
  /** Given when this browser keeps an API key. */
  onForgetKey?: () => void;
}) {
  return (
    <nav className="sessions" aria-label="Chats">
      <div className="brand">Perdure</div>
      <button type="button" className="new-chat" onClick={onNew}>
        + New chat
      </button>
      <ul>
        {sessions.map(session => (
          <SessionItem
            key={session.id}
            session={session}
            active={session.id === current}
            onOpen={() => onOpen(session.id)}
            onRename={title => onRename(session.id, title)}
            onDelete={() => onDelete(session.id)}
          />
        ))}
      </ul>
      {onForgetKey && (
        <button type="button" className="link forget-key" onClick={onForgetKey}>
          Forget API key
        </button>
      )}
    </nav>
  );
}

function SessionItem({
  session,
  active,
  onOpen,
  onRename,
  onDelete,
}: {
  session: Session;
  active: boolean;
  onOpen: () => void;
  onRename: (title: string) => void;
  onDelete: () => void;
}) {
  const [mode, setMode] = useState<'show' | 'rename' | 'delete'>('show');
  const [title, setTitle] = useState(session.title);
  const rename = (event: FormEvent) => {
    event.preventDefault();
    if (title.trim() && title !== session.title) onRename(title.trim());
    setMode('show');
  };
  if (mode === 'rename') {
    return (
      <li className="session active" data-session-id={session.id}>
        <form onSubmit={rename}>
          <input
            aria-label="New title"
            autoFocus
            maxLength={200}
            value={title}
            onChange={event => setTitle(event.target.value)}
            onBlur={rename}
            onKeyDown={event => event.key === 'Escape' && setMode('show')}
          />
        </form>
      </li>
    );
  }
  if (mode === 'delete') {
    return (
      <li className="session active confirm" data-session-id={session.id}>
        <span>Delete this chat?</span>
        <button type="button" className="danger" onClick={onDelete}>
          Delete
        </button>
        <button type="button" onClick={() => setMode('show')}>
          Keep
        </button>
      </li>
    );
  }
  return (
    <li className={`session${active ? ' active' : ''}`} data-session-id={session.id}>
      <button
        type="button"
        className="session-open"
        onClick={onOpen}
        title={`${session.title} (agent: ${session.agent})`}
      >
        {session.status !== 'idle' && (
          <span className={`dot dot-${session.status}`} aria-label={session.status} />
        )}
        <span className="session-title">{session.title || 'Untitled'}</span>
      </button>
      <span className="session-tools">
        <button
          type="button"
          className="link"
          aria-label="Rename"
          title="Rename"
          onClick={() => {
            setTitle(session.title);
            setMode('rename');
          }}
        >
          <Icon path="M4 20h4L19 9l-4-4L4 16v4zM14 6l4 4" />
        </button>
        <button
          type="button"
          className="link"
          aria-label="Delete"
          title="Delete"
          onClick={() => setMode('delete')}
        >
          <Icon path="M5 7h14M10 7V4h4v3M7 7l1 13h8l1-13" />
        </button>
      </span>
    </li>
  );
}

function Icon({ path }: { path: string }) {
  return (
    <svg
      viewBox="0 0 24 24"
      width="15"
      height="15"
      fill="none"
      stroke="currentColor"
      strokeWidth="1.8"
      aria-hidden="true"
    >
      <path d={path} strokeLinecap="round" strokeLinejoin="round" />
    </svg>
  );
}
