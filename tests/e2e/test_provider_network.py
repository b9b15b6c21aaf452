"""The provider SDKs' connections on asyncio's streams (activities/providers/network.py): the
same answers and the same failures as httpx's own transport, over TCP and TLS."""

import asyncio
import contextlib
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx2
import pytest

from activities.providers.clients import anthropic_client, openai_client
from activities.providers.config import ProviderConfig
from activities.providers.network import AsyncioBackend, asyncio_transport
from tests.databases import skip_or_fail
from tests.waiting import WAIT_SECONDS

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
PROXY_VARIABLES = (
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "https_proxy",
    "http_proxy",
    "all_proxy",
)
EVENTS = [f'data: {{"n": {n}}}\n\n'.encode() for n in range(50)]


async def read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ),
        0,
    )
    await reader.readexactly(length)


def chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


async def sent(writer: asyncio.StreamWriter, events: list[bytes], gap: float) -> None:
    """The response head, then `events` a packet each, `gap` seconds apart."""
    writer.write(SSE_HEAD)
    for event in events:
        writer.write(chunked(event))
        await writer.drain()
        await asyncio.sleep(gap)


async def ended(writer: asyncio.StreamWriter) -> None:
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    writer.close()


async def streaming(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An SSE response, an event a packet, as a provider streams an answer."""
    await read_request(reader)
    await sent(writer, EVENTS, gap=0.001)
    await ended(writer)


async def dropping(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Half an answer, then the connection dropped (a provider or network failure)."""
    await read_request(reader)
    await sent(writer, EVENTS[:1], gap=0)
    writer.transport.abort()


async def paced(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An answer that lasts longer than the read timeout, each gap well within it."""
    await read_request(reader)
    await sent(writer, EVENTS[:15], gap=0.1)
    await ended(writer)


async def falling_silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Part of an answer at a steady pace, then nothing."""
    await read_request(reader)
    await sent(writer, EVENTS[:5], gap=0.1)
    await asyncio.sleep(30)


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    await asyncio.sleep(30)


@contextlib.asynccontextmanager
async def serving(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        server.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (Debian's openssl, as `make test` has it)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        skip_or_fail("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            str(openssl),
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def client(verify: ssl.SSLContext | bool = True, read: float = 5.0) -> httpx2.AsyncClient:
    transport = asyncio_transport(verify=verify)
    assert transport is not None
    return httpx2.AsyncClient(transport=transport, timeout=httpx2.Timeout(5.0, read=read))


async def received(http: httpx2.AsyncClient, url: str) -> bytes:
    async with http.stream("POST", f"{url}/v1/chat/completions", json={"stream": True}) as response:
        return b"".join([part async for part in response.aiter_raw()])


async def test_a_streamed_answer_arrives_whole() -> None:
    async with serving(streaming) as url, client() as http:
        assert await received(http, url) == b"".join(EVENTS)


async def test_a_streamed_answer_arrives_whole_over_tls(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))

    async with serving(streaming, server_tls) as url, client(verify=trusting) as http:
        assert await received(http, url) == b"".join(EVENTS)


async def test_an_untrusted_certificate_is_a_connect_error(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)

    async with serving(streaming, server_tls) as url, client() as http:
        with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await received(http, url)


async def test_a_refused_connection_is_a_connect_error() -> None:
    async with serving(streaming) as url:
        pass  # closed: nothing listens there now
    async with client() as http:
        with pytest.raises(httpx2.ConnectError):
            await received(http, url)


async def test_a_dropped_connection_mid_answer_is_an_incomplete_body() -> None:
    async with serving(dropping) as url, client() as http:
        with pytest.raises(httpx2.RemoteProtocolError, match="incomplete chunked read"):
            await received(http, url)


async def test_a_silent_server_is_a_read_timeout() -> None:
    async with serving(silent) as url, client(read=0.3) as http:
        with pytest.raises(httpx2.ReadTimeout):
            await received(http, url)


async def test_the_read_timeout_bounds_each_wait_not_the_whole_answer() -> None:
    async with serving(paced) as url, client(read=1.0) as http:  # the answer: 1.5 s
        assert await received(http, url) == b"".join(EVENTS[:15])


async def test_a_server_that_falls_silent_mid_answer_is_a_read_timeout() -> None:
    async with serving(falling_silent) as url, client(read=1.0) as http:
        started = asyncio.get_running_loop().time()
        with pytest.raises(httpx2.ReadTimeout):
            await received(http, url)
        # Five events 0.1 s apart, then the timeout: well before the server's 30 s.
        assert asyncio.get_running_loop().time() - started < 5


async def test_a_pooled_connection_the_server_closed_is_not_reused() -> None:
    closed = asyncio.Event()

    async def streaming_then_closing(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await streaming(reader, writer)
        await writer.wait_closed()
        closed.set()

    async with serving(streaming_then_closing) as url, client() as http:
        first = await received(http, url)
        await asyncio.wait_for(closed.wait(), timeout=WAIT_SECONDS)  # its end, after the answer
        assert await received(http, url) == first


def test_a_proxy_in_the_environment_keeps_the_sdks_own_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")

    assert asyncio_transport() is None


def test_no_proxy_alone_names_no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in PROXY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")

    assert asyncio_transport() is not None


async def test_the_provider_clients_connect_through_the_asyncio_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in PROXY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    config = ProviderConfig(
        openai_api_key="k", anthropic_api_key="k", openai_base_url="http://127.0.0.1:9/v1"
    )

    for sdk in (openai_client(config), anthropic_client(config)):
        pool = sdk._client._transport._pool  # type: ignore[attr-defined]
        assert isinstance(pool._network_backend, AsyncioBackend)
