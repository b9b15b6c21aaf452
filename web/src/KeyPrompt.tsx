// Asked for when the gateway answers 401: the API key, kept in this browser (auth.ts). The
// page then loads again with it, so every request of the page carries it from the start.
import { useState, type FormEvent } from 'react';

import { rememberKey, storedKey } from './auth';

export function KeyPrompt() {
  const [key, setKey] = useState('');
  const refused = storedKey() !== null;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (!key.trim()) return;
    rememberKey(key.trim());
    location.reload();
  };
  return (
    <main className="key-prompt">
      <form onSubmit={submit} aria-labelledby="key-prompt-title">
        <h1 id="key-prompt-title">This gateway needs an API key</h1>
        {refused && (
          <p className="banner error" role="alert">
            The gateway refused the key this browser kept. Enter another one.
          </p>
        )}
        <p>
          Ask whoever runs Perdure for a key (<code>perdure keys create --tenant …</code>). It is kept in this
          browser until you choose “Forget API key”.
        </p>
        <input
          aria-label="API key"
          type="password"
          autoComplete="off"
          autoFocus
          maxLength={512}
          value={key}
          onChange={event => setKey(event.target.value)}
        />
        <button type="submit" className="primary" disabled={!key.trim()}>
          Use key
        </button>
      </form>
    </main>
  );
}
