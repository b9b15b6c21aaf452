// The open chat's workspace (docs/workspace.md): its files as a tree, and one file's content.
import { useEffect, useState } from 'react';

import { api, readableError, type Workspace } from './api';

export function FilesPanel({
  chatId,
  selected,
  onSelect,
  refreshKey,
  onClose,
}: {
  chatId: string;
  selected?: string;
  onSelect: (path: string) => void;
  /** Changes when the chat may have changed its files (a turn streamed or ended). */
  refreshKey: number;
  onClose: () => void;
}) {
  const [workspace, setWorkspace] = useState<Workspace>();
  const [content, setContent] = useState<string>();
  const [problem, setProblem] = useState<string>();

  useEffect(() => {
    let current = true;
    api.files(chatId).then(
      listed => current && setWorkspace(listed),
      error => current && setProblem(readableError(error)),
    );
    return () => {
      current = false;
    };
  }, [chatId, refreshKey]);

  const version = workspace?.files.find(file => file.path === selected)?.version;
  useEffect(() => {
    if (!selected) return;
    let current = true;
    setContent(undefined);
    api.file(chatId, selected).then(
      text => current && setContent(text),
      error => current && setProblem(readableError(error)),
    );
    return () => {
      current = false;
    };
  }, [chatId, selected, version]);

  return (
    <aside className="files" aria-label="Files">
      <div className="files-head">
        <h2>Files</h2>
        {workspace && (
          <span className="files-size">
            {workspace.files.length} · {workspace.totalBytes} bytes
          </span>
        )}
        <button type="button" className="link" aria-label="Close files" onClick={onClose}>
          ×
        </button>
      </div>
      {problem && <p className="tool-error">{problem}</p>}
      {workspace && workspace.files.length === 0 && <p className="files-empty">No files yet.</p>}
      <ul className="file-tree">
        {workspace?.files.map(file => {
          const parts = file.path.split('/');
          const folder = parts.slice(0, -1).join('/');
          return (
            <li key={file.path} style={{ paddingLeft: `${(parts.length - 1) * 0.8}rem` }}>
              {folder && <span className="file-folder">{folder}/</span>}
              <button
                type="button"
                className={`link${file.path === selected ? ' selected' : ''}`}
                aria-current={file.path === selected}
                onClick={() => onSelect(file.path)}
              >
                {parts.at(-1)}
              </button>
            </li>
          );
        })}
      </ul>
      {selected && (
        <section className="file-view" aria-label={`File ${selected}`}>
          <h3>
            {selected} {version !== undefined && <span className="file-version">v{version}</span>}
          </h3>
          {content === undefined ? (
            <p className="files-empty">Loading…</p>
          ) : (
            <pre className="file-content">{content}</pre>
          )}
        </section>
      )}
    </aside>
  );
}
