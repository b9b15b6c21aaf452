"""Trim what a model repeats of a partial answer it was asked to continue.

APIs that cannot continue a partial assistant message (OpenAI Chat Completions, the Responses
API without its background re-attach, Anthropic with extended thinking) are sent the partial
followed by an instruction to continue exactly where it stops. Models mostly comply, but often
start by repeating the last word or two, sometimes the whole partial. The continuation is
therefore cut by its **overlap** with the partial:

The overlap is the longest prefix of the continuation that is also a suffix of the partial,
accepted only when

1. it starts at a word boundary of the partial: a model that repeats, repeats whole words
   (`"… 9 1"` continued as `"9 10 11"` overlaps by `"9 1"`; a suffix starting inside a word,
   like `"an"` of `"ban"`, is never cut), or it starts with whitespace; and
2. it is not tiny: at least `MIN_OVERLAP` non-whitespace characters, or the whole partial, or
   only whitespace duplicating the partial's trailing whitespace (a partial ending in `" "`
   continued as `" 6"` keeps one space). A one-letter "overlap" is more likely a genuine
   continuation (`"… 10 1"` continued as `"1 12"`) than a repeat.

Whitespace is compared exactly, and so is case; a repeat that differs in either is not cut.
This is best effort: a model that paraphrases what it repeats cannot be trimmed.
"""

MIN_OVERLAP = 2
"""Non-whitespace characters an overlap needs, unless it is the whole partial."""


def _starts_at_boundary(partial: str, start: int) -> bool:
    return start == 0 or partial[start - 1].isspace() or partial[start].isspace()


def _acceptable(partial: str, length: int) -> bool:
    start = len(partial) - length
    overlap = partial[start:]
    if not overlap.strip():
        return True  # only whitespace: it duplicates the partial's trailing whitespace
    if not _starts_at_boundary(partial, start):
        return False
    solid = sum(not char.isspace() for char in overlap)
    return solid >= MIN_OVERLAP or length == len(partial)


def overlap_length(partial: str, continuation: str) -> int:
    """How many leading characters of `continuation` repeat the end of `partial` (see above)."""
    longest = min(len(partial), len(continuation))
    for length in range(longest, 0, -1):
        if partial.endswith(continuation[:length]) and _acceptable(partial, length):
            return length
    return 0


def trim_overlap(partial: str, continuation: str) -> str:
    """`continuation` without the part that repeats the end of `partial`."""
    return continuation[overlap_length(partial, continuation) :]


class OverlapTrimmer:
    """Trims the overlap from a streamed continuation, holding back only what is undecided.

    Deltas are buffered while the text so far could still be the start of a longer repeat of
    the partial's end; as soon as it cannot (usually at the first delta), the overlap is cut
    and everything after it passes through unchanged. Call `flush()` when the stream ends.
    """

    def __init__(self, partial: str) -> None:
        self._partial = partial
        self._held = ""
        self._decided = not partial

    def __call__(self, delta: str) -> str:
        if self._decided:
            return delta
        self._held += delta
        if self._could_grow():
            return ""
        return self.flush()

    @property
    def holding(self) -> bool:
        """Text is held back, undecided."""
        return bool(self._held)

    def flush(self) -> str:
        """Decide on what is held (the text ended) and return what remains of it. Nothing held:
        nothing to decide yet, the next text is still checked."""
        if self._decided or not self._held:
            return ""
        self._decided = True
        held, self._held = self._held, ""
        return trim_overlap(self._partial, held)

    def _could_grow(self) -> bool:
        """Whether the held text is a proper prefix of some suffix of the partial: an
        occurrence of it in the partial that ends before the partial does."""
        return self._partial.find(self._held, 0, len(self._partial) - 1) != -1
