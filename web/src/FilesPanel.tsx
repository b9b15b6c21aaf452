// The open chat's workspace (docs/workspace.md): its files as a tree, one file's content, and
// a person's own changes: uploads and deletes, each only over the version shown.
import { useEffect, useState, type ChangeEvent } from 'react';

import { api, readableError, type FileContent, type Workspace } from './api';

export function FilesPanel({
  chatId,
  selected,
  onSelect,
  refreshKey,
  onClose,
}: {
  chatId: string;
  selected?: string;
  /** A file to show, or none (after it was deleted here). */
  onSelect: (path: string | undefined) => void;
  /** Changes when the chat may have changed its files (a turn streamed or ended). */
  refreshKey: number;
  onClose: () => void;
}) {
  const [workspace, setWorkspace] = useState<Workspace>();
  const [content, setContent] = useState<FileContent>();
  const [problem, setProblem] = useState<string>();
  /** Counts this panel's own changes, so the listing is read again after each. */
  const [changes, setChanges] = useState(0);
  const [confirming, setConfirming] = useState(false);

  useEffect(() => {
    let current = true;
    api.files(chatId).then(
      listed => current && setWorkspace(listed),
      error => current && setProblem(readableError(error)),
    );
    return () => {
      current = false;
    };
  }, [chatId, refreshKey, changes]);

  const version = workspace?.files.find(file => file.path === selected)?.version;
  useEffect(() => {
    if (!selected || version === undefined) return; // read once listed, and only if there
    let current = true;
    setContent(undefined);
    setConfirming(false);
    api.file(chatId, selected).then(
      text => current && setContent(text),
      error => current && setProblem(readableError(error)),
    );
    return () => {
      current = false;
    };
  }, [chatId, selected, version]);

  /** Whether the change was made; the listing is read again either way. */
  const changed = (done: Promise<unknown>) =>
    done.then(
      () => {
        setProblem(undefined);
        setChanges(n => n + 1);
        return true;
      },
      error => {
        setProblem(readableError(error));
        setChanges(n => n + 1);
        return false;
      },
    );

  const upload = async (event: ChangeEvent<HTMLInputElement>) => {
    const files = Array.from(event.target.files ?? []);
    event.target.value = '';
    for (const file of files) {
      // Over the version this panel shows, or only as a new file: never over an unseen change.
      const shown = workspace?.files.find(known => known.path === file.name)?.version;
      await changed(api.putFile(chatId, file.name, file, shown ?? 'absent'));
    }
    if (files.length === 1) onSelect(files[0].name);
  };

  const remove = async (path: string, at: number) => {
    setConfirming(false);
    if (await changed(api.deleteFile(chatId, path, at))) onSelect(undefined);
  };

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
      <label className="link files-upload">
        Upload
        <input type="file" multiple aria-label="Upload files" onChange={event => void upload(event)} />
      </label>
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
          {version !== undefined &&
            (confirming ? (
              <p className="file-actions">
                Delete {selected}?{' '}
                <button type="button" className="link" onClick={() => void remove(selected, version)}>
                  Yes, delete
                </button>{' '}
                <button type="button" className="link" onClick={() => setConfirming(false)}>
                  Keep
                </button>
              </p>
            ) : (
              <p className="file-actions">
                <button type="button" className="link" onClick={() => setConfirming(true)}>
                  Delete
                </button>
              </p>
            ))}
          {version === undefined && workspace ? (
            <p className="files-empty">Not in the workspace.</p>
          ) : content === undefined ? (
            <p className="files-empty">Loading…</p>
          ) : 'text' in content ? (
            <pre className="file-content">{content.text}</pre>
          ) : (
            <p className="files-empty">Not text: {content.bytes} bytes, not shown.</p>
          )}
        </section>
      )}
    </aside>
  );
}
