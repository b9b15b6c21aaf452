// Markdown of answers: marked renders it, DOMPurify keeps only safe HTML (a model's answer is
// untrusted), code blocks get their language and a copy button.
import DOMPurify from 'dompurify';
import { Marked, type Tokens } from 'marked';
import { useMemo, type MouseEvent } from 'react';

const escape = (text: string) =>
  text.replace(/[&<>"']/g, c => `&${{ '&': 'amp', '<': 'lt', '>': 'gt', '"': 'quot', "'": '#39' }[c]};`);

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    code({ text, lang }: Tokens.Code) {
      const language = (lang ?? '').split(/\s/)[0];
      return (
        `<div class="code"><div class="code-head"><span>${escape(language || 'code')}</span>` +
        `<button type="button" data-copy>Copy</button></div>` +
        `<pre><code>${escape(text)}</code></pre></div>`
      );
    },
  },
});

// Links open in a new tab and tell the target nothing about the page.
DOMPurify.addHook('afterSanitizeAttributes', node => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

function copyCode(event: MouseEvent<HTMLDivElement>) {
  const button = (event.target as HTMLElement).closest('button[data-copy]');
  const code = button?.closest('.code')?.querySelector('code')?.textContent;
  if (!button || code == null) return;
  void navigator.clipboard?.writeText(code).then(() => {
    button.textContent = 'Copied';
    setTimeout(() => (button.textContent = 'Copy'), 1500);
  });
}

export function Markdown({ text }: { text: string }) {
  // Parsed again on every update of a streaming answer: simpler than incremental parsing,
  // and cheap at the size of a chat answer.
  const html = useMemo(() => DOMPurify.sanitize(marked.parse(text, { async: false })), [text]);
  return <div className="markdown" onClick={copyCode} dangerouslySetInnerHTML={{ __html: html }} />;
}
