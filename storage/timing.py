"""Wall-clock time for rows (seconds since the epoch)."""

import time


def now() -> float:
    return time.time()
