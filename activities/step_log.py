"""The answer's log as one model step sees it: the chunks read, the chunks the step adds
(written through its writer as they are added), and their reduction, kept up to date."""

from perdure.domain.reducer import Reducer, Reduction
from perdure.domain.step_state import StepState, step_state
from perdure.domain.ui import Chunk
from storage.log_appender import BufferedLog


class StepLog:
    def __init__(self, chunks: list[Chunk], writer: BufferedLog) -> None:
        self.chunks = chunks
        self.writer = writer
        self._reducer = Reducer(chunks)
        self._snapshot: Reduction | None = None

    def add(self, chunks: list[Chunk]) -> None:
        """Write `chunks` after what the log holds (buffered: `writer.flush()` waits)."""
        self.writer.add(chunks)
        self.chunks.extend(chunks)
        self._reducer.add(chunks)
        self._snapshot = None

    @property
    def reduction(self) -> Reduction:
        if self._snapshot is None:
            self._snapshot = self._reducer.snapshot()
        return self._snapshot

    def state(self, step: int) -> StepState:
        return step_state(self.reduction, step)
