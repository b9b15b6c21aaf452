"""Adjacent deltas of one part, written as one chunk: fewer log rows and SSE events, same text.

A flush of the chunk log carries what a turn produced since the previous flush; under load
that is several deltas of the same text part. Stored and sent as one delta each, they cost a
row, a JSON encoding, a read and an SSE event apiece. Joined, the client receives the same
text, in the same order, at the same moment (the flush is what makes it visible at all).

Only plain deltas join: a chunk with any other field (provider metadata) keeps its own row.
"""

from perdure.domain.ui import Chunk

_JOINED: dict[str, tuple[str, str]] = {
    "text-delta": ("id", "delta"),
    "reasoning-delta": ("id", "delta"),
    "tool-input-delta": ("toolCallId", "inputTextDelta"),
}
"""Per delta type: the field naming its part, and the field whose text is appended."""


def _joinable(chunk: Chunk) -> tuple[str, str, str] | None:
    """(type, part id, text field) of a plain delta; None for any other chunk."""
    fields = _JOINED.get(chunk.get("type", ""))
    if fields is None:
        return None
    part_field, text_field = fields
    if chunk.keys() != {"type", part_field, text_field}:
        return None
    part, text = chunk[part_field], chunk[text_field]
    if not isinstance(part, str) or not isinstance(text, str):
        return None
    return chunk["type"], part, text_field


def coalesce_deltas(chunks: list[Chunk]) -> list[Chunk]:
    """`chunks`, each run of plain deltas of one part joined into one chunk."""
    joined: list[Chunk] = []
    previous: tuple[str, str, str] | None = None
    for chunk in chunks:
        key = _joinable(chunk)
        if key is not None and key == previous:
            text_field = key[2]
            last = joined[-1]
            joined[-1] = {**last, text_field: last[text_field] + chunk[text_field]}
            continue
        joined.append(chunk)
        previous = key
    return joined
