"""Write a model step's chunks to the log in batches, then wake readers: nothing is published
unlogged.

The writer buffers; the process's one `LogAppender` commits the buffers of every turn
together, one transaction per flush. The first chunk is written at once; chunks produced
while a write is in flight are coalesced into the next write. Latency stays at one write,
and a fast provider (or many chats) gets batches as large as the store needs to keep up.
"""

from storage.bus import ChunkBus
from storage.chunks import LogWriter
from storage.db import Database
from storage.log_appender import BufferedLog, LogAppender


class ChunkWriter(BufferedLog):
    """`add` chunks (with a provider cursor), `flush` to wait until they are in the log;
    `last_seq` is the last seq written. A failed write (e.g. `StaleWriter`: a newer attempt
    claimed the log) is raised by the next `add` or `flush`."""

    def __init__(
        self,
        db: Database,
        bus: ChunkBus,
        *,
        message_id: str,
        writer: LogWriter,
        submission_id: str,
        appender: LogAppender | None = None,
    ) -> None:
        super().__init__(
            appender or LogAppender.of(db, bus),
            message_id=message_id,
            writer=writer,
            submission_id=submission_id,
        )
