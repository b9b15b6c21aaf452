"""A TCP proxy that can cut the link it carries, for partition and outage tests.

`silence()` is a partition as a network makes one: every connection stays open and nothing more
goes through in either direction (new connections are accepted and held the same way).
`refuse()` is the server going away: every connection is reset, and so is each new one.
`restore()` forwards again; connections held silent carry what was sent meanwhile, as a network
that heals. It listens on 127.0.0.1 only, and forwards only to the one target it was made for.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator

CHUNK = 65_536


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0  # chosen by the system at start: no other process can take it first
        self._open = asyncio.Event()
        self._open.set()
        self._refusing = False
        self._connections: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def silence(self) -> None:
        self._open.clear()

    def refuse(self) -> None:
        self._refusing = True
        for writer in list(self._connections):
            writer.transport.abort()
        self._connections.clear()

    def restore(self) -> None:
        self._refusing = False
        self._open.set()

    async def close(self) -> None:
        self.refuse()
        self._open.set()  # the held pipes end as their connections are reset
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(
        self, client_reader: asyncio.StreamReader, client: asyncio.StreamWriter
    ) -> None:
        if self._refusing:
            client.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._connections.add(client)
        upstream: asyncio.StreamWriter | None = None
        try:
            await self._open.wait()  # a connection made during a partition is held unanswered
            server_reader, upstream = await asyncio.open_connection(*self.target)
            self._connections.add(upstream)
            await asyncio.gather(
                self._pipe(client_reader, upstream), self._pipe(server_reader, client)
            )
        except OSError:  # a reset, or the target refusing
            pass
        except asyncio.CancelledError:  # closed by `close()`: its end, not an error to report
            pass
        finally:
            for writer in (client, upstream):
                if writer is not None:
                    self._connections.discard(writer)
                    writer.transport.abort()
            self._tasks.discard(task)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(CHUNK):
            # Taken but not passed on while silent: the sender's kernel sees its bytes go, and
            # no answer ever comes (what a partition looks like to the application).
            await self._open.wait()
            writer.write(data)
            await writer.drain()
        with contextlib.suppress(OSError):
            writer.write_eof()


@contextlib.asynccontextmanager
async def tcp_proxy(target_host: str, target_port: int) -> AsyncIterator[TcpProxy]:
    proxy = TcpProxy(target_host, target_port)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
