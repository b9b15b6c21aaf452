"""The sockets Perdure's servers listen on (`perdure gateway`, `serve`, `dev`, `relay`): bound
before anything starts, and every connection they accept sends a small answer at once."""

import asyncio
import socket

import pytest

from perdure.commands.cli import _listening_socket


async def test_a_connection_accepted_on_a_listening_socket_has_nagle_off() -> None:
    """With Nagle on, a response's body waited for the client's delayed ACK of its headers:
    40 ms on every small answer of a kept-alive connection."""
    listening = _listening_socket("127.0.0.1", 0, variable="PERDURE_PORT")
    nodelay: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection: socket.socket = writer.get_extra_info("socket")
        nodelay.set_result(connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(accepted, sock=listening)
    async with server:
        _, writer = await asyncio.open_connection(*listening.getsockname()[:2])
        async with asyncio.timeout(5):
            assert await nodelay != 0
        writer.close()


def test_a_port_in_use_stops_the_command_with_one_line() -> None:
    taken = _listening_socket("127.0.0.1", 0, variable="PERDURE_PORT")
    taken.listen()
    try:
        with pytest.raises(SystemExit, match=r"cannot listen on 127\.0\.0\.1:\d+ \(PERDURE_PORT\)"):
            _listening_socket("127.0.0.1", taken.getsockname()[1], variable="PERDURE_PORT")
    finally:
        taken.close()
