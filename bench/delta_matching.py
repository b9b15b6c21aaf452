"""Which received text delta carries each delta the provider wrote, by position in the text.

The worker joins the deltas of one log flush into one event (perdure/domain/delta_coalescing.py),
so provider deltas and SSE events are not one-to-one: a provider delta arrived with the first
event whose text reaches its end.
"""


def covering_events(received: list[str], written: list[str]) -> list[int]:
    """For each of `written` (the provider's deltas, in order), the index in `received` (the
    text of the client's text deltas, in order) of the first one whose text reaches its end.
    Both must spell the same text."""
    if "".join(received) != "".join(written):
        raise ValueError("the client's text deltas do not spell the provider's text")
    reached: list[int] = []
    length = 0
    for text in received:
        length += len(text)
        reached.append(length)
    found: list[int] = []
    end = index = 0
    for piece in written:
        end += len(piece)
        while reached[index] < end:
            index += 1
        found.append(index)
    return found
