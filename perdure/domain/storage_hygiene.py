"""What a stored assistant message may hold: provider-ephemeral metadata stripped, and a size
cap (`ROW_MAX_BYTES`) met by compacting its largest contents, with a visible marker in each and
the facts in its metadata.

Pure functions: the finish activity applies them to the reduction of the log before storing it;
the chunk log itself keeps every chunk as streamed.

**Ephemeral metadata.** OpenAI's Responses API tags parts with `providerMetadata.openai.itemId`
(the id of an output item of a stored response) and `reasoningEncryptedContent`. Within the
turn that made them, the log keeps them and the tool loop's next requests reference the
reasoning items by id (`domain/conversation.py`); a stored message drops them: OpenAI keeps a
stored response for a limited time, and a later turn's reference to one it no longer has would
be a 404. Everything else is kept, Anthropic's thinking `signature` and `redactedData` above
all: a provider that replays thinking needs them unmodified.

**The cap** is measured as the store writes the row (`json.dumps` of `parts` and of
`metadata`). A message over it is compacted in this order, each step only as far as needed:

1. tool outputs (`output-available`) over `KEEP_BYTES`, **largest first**: cut to their first
   `KEEP_BYTES` (of the text, or of the JSON of a structured output), then
   `[output truncated for storage: K of N bytes kept]`
   (`metadata.compactedToolOutputs`: the tool call ids);
2. reasoning, then text parts over `LONG_TEXT_CHARS`, oldest first: replaced by
   `[Text truncated for storage (N chars). First 500 chars: …]`
   (`metadata.compactedReasoningParts`, `metadata.compactedTextParts`: part indices);
3. any part still over `KEEP_BYTES` (a tool input, a file's data URL, a data part), largest
   first: replaced by a text part saying what was removed (`metadata.removedParts`);
4. then, for a message of thousands of parts, its oldest parts, replaced by one text part
   saying how many (`metadata.removedLeadingParts`).

`metadata.compactedFromBytes` records the size before. Steps 3 and 4 guarantee the cap, unless
the metadata alone exceeds it.
"""

import json
from dataclasses import dataclass
from typing import Any

ROW_MAX_BYTES = 1_800_000
"""The largest stored message, in bytes as stored (JSON of parts plus metadata)."""
KEEP_BYTES = 1_000
"""A tool output over this is a candidate for compaction, and is cut to this."""
LONG_TEXT_CHARS = 1_000
"""A text or reasoning part over this many characters is a candidate for compaction."""
TEXT_PREVIEW_CHARS = 500
EPHEMERAL_OPENAI_KEYS = ("itemId", "reasoningEncryptedContent")
_METADATA_FIELDS = ("providerMetadata", "callProviderMetadata")

Part = dict[str, Any]


def sanitize_parts(parts: list[Part]) -> list[Part]:
    """The parts without OpenAI's ephemeral metadata, and without reasoning parts left with
    neither text nor metadata. Parts are copied when changed, never modified."""
    kept: list[Part] = []
    for part in parts:
        for field in _METADATA_FIELDS:
            part = _without_ephemeral(part, field)
        if (
            part.get("type") == "reasoning"
            and not str(part.get("text") or "").strip()
            and not part.get("providerMetadata")
        ):
            continue
        kept.append(part)
    return kept


def _without_ephemeral(part: Part, field: str) -> Part:
    metadata = part.get(field)
    if not isinstance(metadata, dict):
        return part
    openai = metadata.get("openai")
    if not isinstance(openai, dict) or not any(k in openai for k in EPHEMERAL_OPENAI_KEYS):
        return part
    rest_openai = {k: v for k, v in openai.items() if k not in EPHEMERAL_OPENAI_KEYS}
    rest = {k: v for k, v in metadata.items() if k != "openai"}
    if rest_openai:
        rest["openai"] = rest_openai
    copy = {k: v for k, v in part.items() if k != field}
    if rest:
        copy[field] = rest
    return copy


def stored_bytes(parts: list[Part], metadata: dict[str, Any]) -> int:
    """The size of the row's JSON as the store writes it (`json.dumps`, ASCII-escaped)."""
    return _size(parts) + _size(metadata)


def _size(value: Any) -> int:
    return len(json.dumps(value))


@dataclass(frozen=True)
class ForStorage:
    parts: list[Part]
    metadata: dict[str, Any]
    original_bytes: int
    stored_bytes: int

    @property
    def compacted(self) -> bool:
        return "compactedFromBytes" in self.metadata


def for_storage(
    parts: list[Part], metadata: dict[str, Any], *, limit: int = ROW_MAX_BYTES
) -> ForStorage:
    """The message as it should be stored: sanitized, then capped at `limit` bytes."""
    clean = sanitize_parts(parts)
    original = stored_bytes(clean, metadata)
    if original <= limit:
        return ForStorage(clean, dict(metadata), original, original)
    capped = _Capper(clean, metadata, limit)
    capped.run()
    meta = {**capped.metadata(), "compactedFromBytes": original}
    return ForStorage(capped.parts, meta, original, stored_bytes(capped.parts, meta))


class _Capper:
    """Compacts parts one at a time, keeping each part's size so that a fit costs O(1)."""

    def __init__(self, parts: list[Part], metadata: dict[str, Any], limit: int) -> None:
        self.parts = list(parts)
        self.sizes = [_size(part) for part in self.parts]
        self.total = sum(self.sizes)
        self.base = dict(metadata)
        self.limit = limit
        self.tool_outputs: list[str] = []
        self.reasoning: list[int] = []
        self.text: list[int] = []
        self.removed: list[int] = []
        self.leading = 0
        self.metadata_bytes = _size(self.base) + _FACTS_KEYS_BYTES
        """An upper bound of `_size(self.metadata())`, kept as facts are added."""

    def note(self, facts: list[Any], fact: Any) -> None:
        facts.append(fact)
        self.metadata_bytes += _size(fact) + 2

    def metadata(self) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "compactedToolOutputs": self.tool_outputs,
            "compactedReasoningParts": self.reasoning,
            "compactedTextParts": self.text,
            "removedParts": self.removed,
            "removedLeadingParts": self.leading,
        }
        return {**self.base, **{k: v for k, v in facts.items() if v}}

    def _bytes(self, parts_total: int, count: int) -> int:
        # json.dumps of a list: "[" + ", ".join(parts) + "]"
        return 2 + parts_total + 2 * max(count - 1, 0) + self.metadata_bytes + _FACT_RESERVE

    def fits(self) -> bool:
        return self._bytes(self.total, len(self.parts)) <= self.limit

    def replace(self, index: int, part: Part) -> None:
        size = _size(part)
        self.total += size - self.sizes[index]
        self.parts[index], self.sizes[index] = part, size

    def run(self) -> None:
        for step in (self._tool_outputs, self._long_texts, self._large_parts):
            step()
            if self.fits():
                return
        self._leading_parts()

    def _tool_outputs(self) -> None:
        candidates = []
        for index, part in enumerate(self.parts):
            if part.get("state") == "output-available" and part.get("toolCallId") is not None:
                # Eligible by the bytes the cut counts; ordered by the bytes it saves.
                if len(_output_text(part.get("output")).encode()) > KEEP_BYTES:
                    candidates.append((-_size(part.get("output")), index))
        for _, index in sorted(candidates):  # largest first, then oldest
            if self.fits():
                return
            part = self.parts[index]
            self.replace(index, {**part, "output": _cut_output(part.get("output"))})
            self.note(self.tool_outputs, str(part["toolCallId"]))

    def _long_texts(self) -> None:
        # Reasoning first: no provider is sent it again, and the answer matters more to a reader.
        for kind, record in (("reasoning", self.reasoning), ("text", self.text)):
            for index, part in enumerate(self.parts):
                if self.fits():
                    return
                text = part.get("text")
                if part.get("type") == kind and isinstance(text, str):
                    if len(text) > LONG_TEXT_CHARS:
                        self.replace(index, {**part, "text": truncated_text(text)})
                        self.note(record, index)

    def _large_parts(self) -> None:
        compacted = set(self.reasoning) | set(self.text)
        candidates = sorted(
            (-size, index)
            for index, size in enumerate(self.sizes)
            if size > KEEP_BYTES and index not in compacted
        )
        for negative_size, index in candidates:
            if self.fits():
                return
            part = self.parts[index]
            kind = str(part.get("type", "unknown"))
            notice = f"[A {kind} part of {-negative_size} bytes was removed for storage.]"
            self.replace(index, {"type": "text", "text": notice})
            self.note(self.removed, index)
            call_id = part.get("toolCallId")
            if call_id is not None:
                self.tool_outputs = [c for c in self.tool_outputs if c != str(call_id)]

    def _leading_parts(self) -> None:
        """The last resort, for a message of thousands of parts: its oldest parts go, and one
        text part at the front says how many."""
        count = len(self.parts)
        dropped, dropped_bytes = 0, 0
        # The marker is about as large as its reserve; it takes the place of the dropped parts.
        while dropped < count and (
            self._bytes(self.total - dropped_bytes + _MARKER_BYTES, count - dropped + 1)
            > self.limit
        ):
            dropped_bytes += self.sizes[dropped]
            dropped += 1
        if dropped == 0:
            return
        text = f"[The first {dropped} parts ({dropped_bytes} bytes) were removed for storage.]"
        notice: Part = {"type": "text", "text": text}
        gone_calls = {
            str(p["toolCallId"]) for p in self.parts[:dropped] if p.get("toolCallId") is not None
        }
        self.parts = [notice, *self.parts[dropped:]]
        self.sizes = [_size(notice), *self.sizes[dropped:]]
        self.total = sum(self.sizes)
        self.leading = dropped

        def moved(indices: list[int]) -> list[int]:
            return [i - dropped + 1 for i in indices if i >= dropped]

        self.reasoning, self.text = moved(self.reasoning), moved(self.text)
        self.removed = moved(self.removed)
        self.tool_outputs = [c for c in self.tool_outputs if c not in gone_calls]
        self.metadata_bytes = _size(self.metadata())


_FACT_RESERVE = 64
"""Bytes kept free while checking a fit for `compactedFromBytes`, added after."""
_FACTS_KEYS_BYTES = 5 * 32
"""At least the bytes of the five fact keys with their brackets and separators."""
_MARKER_BYTES = 128
"""At least the size of the marker part `_leading_parts` puts first."""


def truncated_text(text: str) -> str:
    return (
        f"[Text truncated for storage ({len(text)} chars). "
        f"First {TEXT_PREVIEW_CHARS} chars: {text[:TEXT_PREVIEW_CHARS]}...]"
    )


def _output_text(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _cut_output(output: Any) -> str:
    data = _output_text(output).encode()
    kept = data[:KEEP_BYTES].decode(errors="ignore")
    return f"{kept}\n[output truncated for storage: {len(kept.encode())} of {len(data)} bytes kept]"
