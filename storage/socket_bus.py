"""Wake-up hints between the processes of one SQLite store, over Unix datagram sockets.

PostgreSQL carries a log's growth to every process with NOTIFY; SQLite has nothing of the kind,
so a gateway beside a separate worker polled every followed log every `PERDURE_POLL_INTERVAL`
(20 ms): a first token waited half of that on average, and an idle poll cost CPU per open
stream. SQLite's processes share one host (the database is a file), so a hint goes by a local
datagram instead:

- every process that follows logs (a gateway, a node) binds one socket in the store's bus
  directory, `<temp dir>/perdure-bus-<uid>-<hash of the database file>`, private to the user
  (0700, checked: a directory someone else owns or others can enter is not used);
- a process that appended (its own bus published, after the commit) sends the logs' ids to
  every socket there but its own, one datagram per flush;
- a receiver full (its buffer: it is far behind) is owed the ids, sent with the next
  datagram; a socket nobody reads any more (its process died) is removed by the next sender;
  the last process to close removes the directory.

A hint is never the data: a receiver reads the log, so a lost hint costs only time. Its
watcher still reads every followed log each `SAFETY_INTERVAL`, as with NOTIFY. Where sockets
cannot be had (another system, a path too long, a directory refused) the store stays polled.
"""

import asyncio
import contextlib
import errno
import hashlib
import logging
import os
import socket
import stat
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path

from sqlalchemy.engine import make_url

from storage.bus import ChunkBus

log = logging.getLogger(__name__)

EVERYTHING = "*"
"""A datagram saying: any log may have grown (the owed ids were too many to list)."""
MAX_DATAGRAM = 60_000
"""Bytes of ids per datagram (a Unix datagram may be larger; a receiver reads this much)."""
MAX_OWED = 4_096
"""Ids kept for a receiver that is full; beyond that it is owed `EVERYTHING` instead."""
SOCKET_SUFFIX = ".sock"
MAX_SOCKET_PATH = 100
"""Below `sun_path`'s 104 (macOS) / 108 (Linux) bytes."""


def bus_directory(database_url: str) -> Path | None:
    """The bus directory of a SQLite database file; None for an in-memory database."""
    parsed = make_url(database_url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    database = os.path.realpath(parsed.database)
    digest = hashlib.sha256(database.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"perdure-bus-{os.getuid()}-{digest}"


def _private_directory(directory: Path) -> bool:
    """Create the directory for this user alone, or check that an existing one is so."""
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700)
    info = directory.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        log.warning("%s is not a directory of this user: logs are polled instead", directory)
        return False
    if info.st_mode & 0o077:
        log.warning("%s is open to other users: logs are polled instead", directory)
        return False
    return True


class SocketBus:
    """This process's end of the store's datagram bus (see the module's docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sender.setblocking(False)
        self._receiver: socket.socket | None = None
        self._own: str | None = None
        self._peers: list[str] = []
        self._peers_seen: int | None = None
        """The directory's mtime when `_peers` was listed: a socket added or removed changes it."""
        self._owed: dict[str, set[str]] = {}
        self.sent = 0
        """Datagrams sent, for tests and stats."""

    @classmethod
    def open(cls, database_url: str) -> "SocketBus | None":
        """The bus of this SQLite store, or None where it cannot be used (logged)."""
        directory = bus_directory(database_url)
        if directory is None or not hasattr(socket, "AF_UNIX"):
            return None
        if len(str(directory)) + len(f"/{uuid.uuid4().hex}{SOCKET_SUFFIX}") > MAX_SOCKET_PATH:
            log.warning("%s is too long a path for sockets: logs are polled instead", directory)
            return None
        try:
            if not _private_directory(directory):
                return None
        except OSError as error:
            log.warning("no bus directory at %s (%s): logs are polled instead", directory, error)
            return None
        return cls(directory)

    def listen(self, bus: ChunkBus) -> None:
        """Bind this process's socket and hand what it hears to `bus` (as heard, never sent on).
        The bus is reliable from now on: every append of the store is announced here."""
        path = str(self.directory / f"{uuid.uuid4().hex}{SOCKET_SUFFIX}")
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        receiver.setblocking(False)
        try:
            try:
                receiver.bind(path)
            except FileNotFoundError:  # the last process of the bus removed it meanwhile
                if not _private_directory(self.directory):
                    raise
                receiver.bind(path)
        except OSError as error:
            receiver.close()
            log.warning("cannot listen at %s (%s): logs are polled instead", path, error)
            return
        self._receiver, self._own = receiver, path

        def readable() -> None:
            while True:
                try:
                    datagram = receiver.recv(MAX_DATAGRAM)
                except (BlockingIOError, InterruptedError):
                    return
                for message_id in datagram.decode(errors="replace").split():
                    bus.heard(None if message_id == EVERYTHING else message_id)

        asyncio.get_running_loop().add_reader(receiver.fileno(), readable)
        bus.reliable = True

    def send(self, message_ids: Iterable[str]) -> None:
        """Tell every other process on the bus that these logs grew (never blocks)."""
        ids = set(message_ids)
        for peer in list(self._current_peers()):  # a dead peer is dropped on the way
            owed = self._owed.pop(peer, set())
            self._send_to(peer, ids | owed if owed else ids)

    def _send_to(self, peer: str, ids: set[str]) -> None:
        listed = [EVERYTHING] if EVERYTHING in ids else sorted(ids)
        for datagram in _datagrams(listed):
            try:
                self._sender.sendto(datagram, peer)
                self.sent += 1
            except (BlockingIOError, InterruptedError):
                owed = ids if len(ids) <= MAX_OWED else {EVERYTHING}
                self._owed[peer] = owed
                return
            except OSError as error:
                self._forget(peer, stale=error.errno == errno.ECONNREFUSED)
                return

    def _current_peers(self) -> list[str]:
        try:
            seen = self.directory.stat().st_mtime_ns
        except OSError:
            return []
        if seen != self._peers_seen:
            self._peers_seen = seen
            with contextlib.suppress(OSError):
                self._peers = [
                    entry.path
                    for entry in os.scandir(self.directory)
                    if entry.name.endswith(SOCKET_SUFFIX) and entry.path != self._own
                ]
        return self._peers

    def _forget(self, peer: str, *, stale: bool) -> None:
        """A peer that cannot be reached: gone (its file too), or its socket without a reader
        (`stale`: its process died without removing it), which is removed here."""
        if stale:
            with contextlib.suppress(OSError):
                os.unlink(peer)
        with contextlib.suppress(ValueError):
            self._peers.remove(peer)
        self._owed.pop(peer, None)

    def close(self) -> None:
        if self._receiver is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._receiver.fileno())
            self._receiver.close()
            self._receiver = None
        if self._own is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._own)
            self._own = None
        with contextlib.suppress(OSError):  # the last one out (another may still be in it)
            os.rmdir(self.directory)
        self._sender.close()


def _datagrams(ids: list[str]) -> Iterable[bytes]:
    batch: list[bytes] = []
    size = 0
    for message_id in ids:
        encoded = message_id.encode()
        if batch and size + len(encoded) + 1 > MAX_DATAGRAM:
            yield b" ".join(batch)
            batch, size = [], 0
        batch.append(encoded)
        size += len(encoded) + 1
    if batch:
        yield b" ".join(batch)
