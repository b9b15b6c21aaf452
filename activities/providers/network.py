"""The provider SDKs' sockets on asyncio's own streams, not anyio's.

`httpcore2` reads a response through its network backend, one `read` per packet, and a streamed
answer is a packet per delta. Its default backend (anyio) resumes and pauses the socket around
every read (two `epoll_ctl` system calls) inside a cancel scope: about a third of a busy worker's
event-loop CPU (docs/benchmarks.md). asyncio's `StreamReader` keeps reading into its
buffer and pauses only when the buffer is full, so a read of what has arrived is a slice.

Same contract as httpcore2's anyio backend: `ConnectError`/`ConnectTimeout` on connect (and
TLS), `ReadError`/`ReadTimeout`, `WriteError`/`WriteTimeout`, the same `get_extra_info` keys;
the SDKs map these to their own `APIConnectionError` / `APITimeoutError` as before.
"""

# ruff: noqa: ASYNC109 - the `timeout` parameters are httpcore2's network-backend interface
import asyncio
import socket
import ssl
import urllib.request
from collections.abc import Awaitable, Iterable
from typing import Any

import httpcore2
import httpx2
from httpcore2 import AsyncNetworkBackend, AsyncNetworkStream

from activities.providers.deadlines import WaitDeadline

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


class AsyncioStream(AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._read_deadline: WaitDeadline | None = None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if timeout is None:
            return await self._read(max_bytes)
        deadline = self._read_deadline
        if deadline is None or deadline.seconds != timeout:
            if deadline is not None:
                deadline.close()
            # A read that lasts `timeout` fails the stream's reader: the connection is not
            # used again after a timeout. One timer per period, not one per read.
            deadline = self._read_deadline = WaitDeadline(timeout, self._timed_out)
        deadline.begin()
        try:
            return await self._read(max_bytes)
        finally:
            deadline.end()

    async def _read(self, max_bytes: int) -> bytes:
        try:
            return await self._reader.read(max_bytes)
        except TimeoutError as error:  # an OSError: first
            raise httpcore2.ReadTimeout(str(error)) from error
        except (OSError, ssl.SSLError) as error:
            raise httpcore2.ReadError(str(error) or type(error).__name__) from error

    def _timed_out(self) -> None:
        self._reader.set_exception(TimeoutError("no data within the read timeout"))

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            async with asyncio.timeout(timeout):
                self._writer.write(buffer)
                await self._writer.drain()
        except TimeoutError as error:
            raise httpcore2.WriteTimeout(str(error)) from error
        except (OSError, ssl.SSLError, RuntimeError) as error:
            raise httpcore2.WriteError(str(error) or type(error).__name__) from error

    async def aclose(self) -> None:
        # Closing starts at once (a TLS close_notify is sent on its own); nothing to wait for.
        if self._read_deadline is not None:
            self._read_deadline.close()
        self._writer.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as error:
            await self.aclose()
            raise httpcore2.ConnectTimeout(str(error)) from error
        except (OSError, ssl.SSLError) as error:
            await self.aclose()
            raise httpcore2.ConnectError(str(error) or type(error).__name__) from error
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "is_readable":
            # asyncio reads in the background: an idle connection the server closed shows as
            # the reader's end, not as a readable socket.
            return self._reader.at_eof() or self._writer.is_closing()
        return None


class AsyncioBackend(AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> AsyncNetworkStream:
        local = (local_address, 0) if local_address else None
        opening = asyncio.open_connection(host, port, local_addr=local)
        return await _connected(opening, timeout, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> AsyncNetworkStream:
        return await _connected(asyncio.open_unix_connection(path), timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def _connected(
    opening: Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]],
    timeout: float | None,
    options: Iterable[SocketOption] | None,
) -> AsyncioStream:
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await opening
    except TimeoutError as error:
        raise httpcore2.ConnectTimeout(str(error)) from error
    except OSError as error:
        raise httpcore2.ConnectError(str(error) or type(error).__name__) from error
    sock: socket.socket | None = writer.get_extra_info("socket")
    if sock is not None:
        for option in options or ():
            sock.setsockopt(*option)
    return AsyncioStream(reader, writer)


PROVIDER_LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
"""The OpenAI and Anthropic SDKs' own connection limits (`DEFAULT_CONNECTION_LIMITS`)."""


def asyncio_transport(
    limits: httpx2.Limits = PROVIDER_LIMITS, *, verify: ssl.SSLContext | bool = True
) -> httpx2.AsyncHTTPTransport | None:
    """An HTTP transport whose connections use `AsyncioBackend`; None where the environment
    names a proxy (a transport given to a client turns its environment proxies off: the SDKs'
    default client keeps them)."""
    if any(url for scheme, url in urllib.request.getproxies().items() if scheme != "no"):
        return None  # `no` is NO_PROXY: exceptions to a proxy, not a proxy
    transport = httpx2.AsyncHTTPTransport(limits=limits, verify=verify)
    # httpx2 builds its pool (no proxy: a plain connection pool) with the default backend and
    # takes no other: swap it before the first connection, as the pool reads it for each new
    # one. A test fails if an httpx2 upgrade moves either attribute.
    transport._pool._network_backend = AsyncioBackend()
    return transport
