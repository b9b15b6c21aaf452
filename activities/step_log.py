"""The answer's log as one model step sees it: the chunks read, every chunk the step adds
(through its writer, the provider's stream included), and their reduction, brought up to date
when it is asked for."""

from perdure.domain.reducer import Reducer, Reduction
from perdure.domain.step_state import StepState, step_state
from perdure.domain.ui import Chunk
from storage.log_appender import BufferedLog


class StepLog:
    def __init__(self, chunks: list[Chunk], writer: BufferedLog) -> None:
        self.chunks = chunks
        self.writer = writer
        self._reducer = Reducer(chunks)
        self._unreduced: list[Chunk] = []
        self._snapshot: Reduction | None = None
        writer.observe(self._added)

    def add(self, chunks: list[Chunk]) -> None:
        """Write `chunks` after what the log holds (buffered: `writer.flush()` waits)."""
        self.writer.add(chunks)

    def record(self, chunks: list[Chunk]) -> None:
        """Chunks the step appended in a transaction of its own (after a flush of `writer`)."""
        self._added(chunks)

    def _added(self, chunks: list[Chunk]) -> None:
        # Reduced when next asked for, not per streamed delta: a step asks at its boundaries.
        self.chunks.extend(chunks)
        self._unreduced.extend(chunks)
        self._snapshot = None

    @property
    def reduction(self) -> Reduction:
        if self._unreduced:
            self._reducer.add(self._unreduced)
            self._unreduced = []
        if self._snapshot is None:
            self._snapshot = self._reducer.snapshot()
        return self._snapshot

    def state(self, step: int) -> StepState:
        return step_state(self.reduction, step)
