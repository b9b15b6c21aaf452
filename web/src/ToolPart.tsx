// A tool call in an answer: its input, its state, its result; and when the turn waits on it,
// the approval buttons or the form for a client-side tool's output.
import { getToolName, type DynamicToolUIPart, type ToolUIPart } from 'ai';
import { useState, type FormEvent } from 'react';

export type ToolPartType = ToolUIPart | DynamicToolUIPart;

export type ToolAnswers = {
  approve: (approvalId: string, approved: boolean, reason?: string) => void;
  output: (tool: string, toolCallId: string, answer: { output: unknown } | { errorText: string }) => void;
  /** Show a workspace file (the files panel). */
  openFile: (path: string) => void;
};

/** The workspace tools whose input names a file (docs/workspace.md). */
const FILE_TOOLS = new Set(['read_file', 'write_file', 'edit_file', 'delete_file']);

const MAX_REASON_CHARS = 2000;

function show(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
}

function stateLabel(part: ToolPartType, waitsForClient: boolean): string {
  switch (part.state) {
    case 'input-streaming':
      return 'preparing';
    case 'input-available':
      return waitsForClient ? 'waiting for you' : 'running';
    case 'approval-requested':
      return 'needs approval';
    case 'approval-responded':
      return part.approval.approved ? 'approved' : 'denied';
    case 'output-available':
      return part.preliminary ? 'working' : 'done';
    case 'output-error':
      return 'failed';
    case 'output-denied':
      return 'denied';
  }
}

export function ToolPart({
  part,
  waitsForClient,
  answers,
}: {
  part: ToolPartType;
  waitsForClient: boolean;
  answers: ToolAnswers;
}) {
  const name = getToolName(part);
  const hasInput =
    part.input !== undefined &&
    !(typeof part.input === 'object' && part.input !== null && Object.keys(part.input).length === 0);
  return (
    <div className="tool" data-tool={name} data-state={part.state}>
      <div className="tool-head">
        <span className="tool-name">{name}</span>
        <span className={`badge badge-${part.state}`}>{stateLabel(part, waitsForClient)}</span>
      </div>
      {hasInput && <pre className="tool-input">{show(part.input)}</pre>}
      {FILE_TOOLS.has(name) && filePath(part.input) && part.state !== 'output-error' && (
        <button
          type="button"
          className="link file-link"
          onClick={() => answers.openFile(filePath(part.input)!)}
        >
          Open {filePath(part.input)}
        </button>
      )}
      {part.state === 'output-available' &&
        (diffOf(part.output) ? (
          <Diff text={diffOf(part.output)!} />
        ) : (
          <pre className="tool-output">{show(part.output)}</pre>
        ))}
      {part.state === 'output-error' && <p className="tool-error">{part.errorText}</p>}
      {part.state === 'output-denied' && (
        <p className="tool-denied">Denied{part.approval.reason ? `: ${part.approval.reason}` : ''}</p>
      )}
      {part.state === 'approval-requested' && (
        <ApprovalForm approvalId={part.approval.id} answers={answers} />
      )}
      {part.state === 'input-available' && waitsForClient && (
        <ClientToolForm tool={name} toolCallId={part.toolCallId} answers={answers} />
      )}
    </div>
  );
}

function filePath(input: unknown): string | undefined {
  const path = typeof input === 'object' && input !== null ? (input as { path?: unknown }).path : undefined;
  return typeof path === 'string' ? path : undefined;
}

function diffOf(output: unknown): string | undefined {
  const diff =
    typeof output === 'object' && output !== null ? (output as { diff?: unknown }).diff : undefined;
  return typeof diff === 'string' && diff ? diff : undefined;
}

/** A workspace change as a unified diff, its added and removed lines marked. */
function Diff({ text }: { text: string }) {
  return (
    <pre className="diff tool-output">
      {text.split('\n').map((line, index) => (
        <span
          key={index}
          className={
            line.startsWith('+') && !line.startsWith('+++')
              ? 'add'
              : line.startsWith('-') && !line.startsWith('---')
                ? 'del'
                : undefined
          }
        >
          {line}
          {'\n'}
        </span>
      ))}
    </pre>
  );
}

function ApprovalForm({ approvalId, answers }: { approvalId: string; answers: ToolAnswers }) {
  const [reason, setReason] = useState('');
  const answer = (approved: boolean) => answers.approve(approvalId, approved, reason.trim() || undefined);
  return (
    <div className="tool-form">
      <input
        aria-label="Reason (optional)"
        placeholder="Reason (optional)"
        maxLength={MAX_REASON_CHARS}
        value={reason}
        onChange={event => setReason(event.target.value)}
      />
      <button type="button" className="primary" onClick={() => answer(true)}>
        Approve
      </button>
      <button type="button" className="danger" onClick={() => answer(false)}>
        Deny
      </button>
    </div>
  );
}

/** The output is sent as JSON when it parses as JSON, as text otherwise. */
function ClientToolForm({
  tool,
  toolCallId,
  answers,
}: {
  tool: string;
  toolCallId: string;
  answers: ToolAnswers;
}) {
  const [text, setText] = useState('');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    let output: unknown = text;
    try {
      output = JSON.parse(text);
    } catch {
      // Plain text it is.
    }
    answers.output(tool, toolCallId, { output });
  };
  return (
    <form className="tool-form" onSubmit={submit}>
      <input
        aria-label={`Output of ${tool}`}
        placeholder="Output (text or JSON)"
        value={text}
        onChange={event => setText(event.target.value)}
      />
      <button type="submit" className="primary">
        Send
      </button>
      <button
        type="button"
        onClick={() => answers.output(tool, toolCallId, { errorText: text || 'The user declined.' })}
      >
        Send as error
      </button>
    </form>
  );
}
