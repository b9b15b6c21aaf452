"""What a message sent while its session's turn runs does (per agent, per request)."""

from dataclasses import dataclass
from typing import Literal, get_args

ConcurrencyStrategy = Literal[
    "queue", "reject", "interrupt", "rollback", "latest", "merge", "drop", "debounce", "steer"
]
"""- `queue`: wait behind the running turn (and earlier queued ones), FIFO;
- `reject`: refused (409), nothing stored;
- `interrupt`: the running turn is stopped (its partial kept), this one runs after the queue;
- `rollback`: as interrupt, and the stopped turn's messages leave the active path;
- `latest`: queued, and every earlier queued submission is skipped;
- `merge`: queued, taking the messages of the earlier queued submissions with it: one turn
  answers them all;
- `drop`: recorded as `skipped`, never run;
- `debounce`: as `merge`, and the turn starts only once no message came for the debounce
  period (also when the session is idle);
- `steer`: stored at once and queued; it joins the running turn at its next step boundary
  (the next model request sees it after the tool results it follows), or, when that turn
  ends first, runs as the next turn."""
STRATEGIES: tuple[str, ...] = get_args(ConcurrencyStrategy)

DEFAULT_DEBOUNCE_MS = 1_000
MAX_DEBOUNCE_MS = 60_000
"""A debounce holds a turn back; a minute is the most anyone waits for a chat answer to start."""


@dataclass(frozen=True)
class Concurrency:
    strategy: ConcurrencyStrategy
    debounce_ms: int = DEFAULT_DEBOUNCE_MS
    """With `debounce`: the quiet period before the turn starts."""

    @property
    def absorbs_queued(self) -> bool:
        """The submission takes the earlier queued submissions' messages into its own turn."""
        return self.strategy in ("merge", "debounce")

    @property
    def steers(self) -> bool:
        """The submission may join the running turn at its next step boundary."""
        return self.strategy == "steer"
