// An MCP server's questions in an answer (a `data-input-request` part, docs/mcp.md#input-required):
// a form per question, answered with Accept, Decline or Cancel at the inputs API; the answer
// then goes on in the same message.
import { useState, type FormEvent } from 'react';

import { api, readableError, type InputAction } from './api';

type Field = { type?: string; title?: string; description?: string; enum?: unknown[] };
type Question = {
  key: string;
  mode: 'form' | 'url';
  message: string;
  requestedSchema?: { properties?: Record<string, Field>; required?: string[] };
  url?: string;
};
export type InputRequestData = {
  waitId: string;
  toolName: string;
  questions: Question[];
  status: 'pending' | 'answered' | 'expired';
  actions?: Record<string, InputAction>;
};

const STATUS_LABELS: Record<string, string> = { answered: 'answered', expired: 'no answer in time' };
const FOLLOW_WITHIN_MS = 10_000;

/** Until the turn took the answer up (its log says the question is no longer pending), so a
 *  resume streams the continuation rather than the park. */
async function untilTakenUp(chatId: string, waitId: string): Promise<void> {
  const deadline = Date.now() + FOLLOW_WITHIN_MS;
  while (Date.now() < deadline) {
    const last = (await api.messages(chatId)).at(-1);
    const part = last?.parts.find(
      each => each.type === 'data-input-request' && (each as { id?: string }).id === waitId,
    ) as { data?: InputRequestData } | undefined;
    if (part?.data?.status !== 'pending') return;
    await new Promise(resolve => setTimeout(resolve, 200));
  }
}

/** A question the turn waits on (it parks the answer as an approval does). */
export const isPendingQuestion = (part: { type: string; data?: unknown }) =>
  part.type === 'data-input-request' && (part.data as { status?: string } | undefined)?.status === 'pending';

/** A form field's value as the schema types it (a number field's text as a number). */
function typed(field: Field, raw: string | boolean): unknown {
  if (typeof raw === 'boolean') return raw;
  if (field.type === 'number' || field.type === 'integer') return raw === '' ? undefined : Number(raw);
  return raw === '' ? undefined : raw;
}

export function InputRequest({
  chatId,
  data,
  onAnswered,
}: {
  chatId: string;
  data: InputRequestData;
  /** Follow the answer's continuation (the stream goes on once the call runs again). */
  onAnswered: () => void;
}) {
  const [values, setValues] = useState<Record<string, Record<string, string | boolean>>>({});
  const [problem, setProblem] = useState<string>();
  const [sending, setSending] = useState(false);
  const pending = data.status === 'pending';

  const send = async (action: InputAction) => {
    const responses = Object.fromEntries(
      data.questions.map(question => {
        if (action !== 'accept' || question.mode === 'url') return [question.key, { action }];
        const fields = question.requestedSchema?.properties ?? {};
        const content = Object.fromEntries(
          Object.entries(values[question.key] ?? {})
            .map(([name, raw]) => [name, typed(fields[name] ?? {}, raw)])
            .filter(([, value]) => value !== undefined),
        );
        return [question.key, { action, content }];
      }),
    );
    setSending(true);
    setProblem(undefined);
    try {
      await api.answerInput(chatId, data.waitId, responses);
      await untilTakenUp(chatId, data.waitId);
      onAnswered();
    } catch (failure) {
      setProblem(readableError(failure));
    } finally {
      setSending(false);
    }
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    void send('accept');
  };
  const set = (key: string, name: string, value: string | boolean) =>
    setValues(all => ({ ...all, [key]: { ...all[key], [name]: value } }));

  return (
    <form className="input-request" data-wait-id={data.waitId} data-status={data.status} onSubmit={submit}>
      <div className="tool-head">
        <span className="tool-name">{data.toolName} asks</span>
        {!pending && <span className="badge">{STATUS_LABELS[data.status]}</span>}
      </div>
      {data.questions.map(question => (
        <fieldset key={question.key} disabled={!pending || sending}>
          <legend>{question.message}</legend>
          {question.mode === 'url' && question.url && (
            <a href={question.url} target="_blank" rel="noopener noreferrer">
              {question.url}
            </a>
          )}
          {pending &&
            Object.entries(question.requestedSchema?.properties ?? {}).map(([name, field]) => (
              <label key={name}>
                {field.title ?? name}
                {field.type === 'boolean' ? (
                  <input
                    type="checkbox"
                    checked={values[question.key]?.[name] === true}
                    onChange={event => set(question.key, name, event.target.checked)}
                  />
                ) : field.enum ? (
                  <select
                    value={String(values[question.key]?.[name] ?? '')}
                    onChange={event => set(question.key, name, event.target.value)}
                  >
                    <option value="" />
                    {field.enum.map(choice => (
                      <option key={String(choice)}>{String(choice)}</option>
                    ))}
                  </select>
                ) : (
                  <input
                    type={field.type === 'number' || field.type === 'integer' ? 'number' : 'text'}
                    required={question.requestedSchema?.required?.includes(name)}
                    value={String(values[question.key]?.[name] ?? '')}
                    onChange={event => set(question.key, name, event.target.value)}
                  />
                )}
              </label>
            ))}
          {!pending && data.actions?.[question.key] && <small>{data.actions[question.key]}</small>}
        </fieldset>
      ))}
      {pending && (
        <div className="tool-form">
          <button type="submit" className="primary" disabled={sending}>
            Accept
          </button>
          <button type="button" className="danger" disabled={sending} onClick={() => void send('decline')}>
            Decline
          </button>
          <button type="button" disabled={sending} onClick={() => void send('cancel')}>
            Cancel
          </button>
        </div>
      )}
      {problem && <p className="tool-error">{problem}</p>}
    </form>
  );
}
