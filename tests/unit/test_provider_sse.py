"""Reading server-sent events off the raw response, as the OpenAI Chat adapter does."""

from collections.abc import AsyncIterator

import httpx2
import openai
import pytest

from activities.providers.sse import event_data, json_events


async def _response(body: bytes | list[bytes]) -> httpx2.Response:
    """A streamed response whose body arrives in the given pieces."""
    pieces = body if isinstance(body, list) else [body]

    async def stream() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=stream())

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    request = client.build_request("POST", "http://provider.test/v1/chat/completions")
    return await client.send(request, stream=True)


async def _data(body: bytes | list[bytes]) -> list[str]:
    return [data async for data in event_data(await _response(body))]


async def test_each_event_yields_its_data() -> None:
    assert await _data(b'data: {"a":1}\n\ndata: [DONE]\n\n') == ['{"a":1}', "[DONE]"]


async def test_comments_and_other_fields_are_skipped() -> None:
    body = b": keep-alive\n\nevent: message\nid: 7\ndata: x\n\n"
    assert await _data(body) == ["x"]


async def test_data_lines_of_one_event_are_joined_by_newlines() -> None:
    assert await _data(b"data: one\ndata: two\n\n") == ["one\ntwo"]


async def test_an_event_split_across_network_reads_arrives_whole() -> None:
    assert await _data([b"da", b'ta: {"a"', b":1}\r", b"\n\r\n"]) == ['{"a":1}']


async def test_lines_may_end_with_a_lone_carriage_return() -> None:
    assert await _data(b"data: a\rdata: b\r\rdata: c\r\r") == ["a\nb", "c"]


async def test_a_unicode_line_separator_inside_the_data_does_not_end_its_line() -> None:
    text = 'data: {"delta": "one\u2028two\u0085three"}\n\n'
    assert await _data(text.encode()) == ['{"delta": "one\u2028two\u0085three"}']


async def test_a_character_split_across_network_reads_arrives_whole() -> None:
    body = 'data: "caf\u00e9 \u2014 \U0001f600"\n\n'.encode()
    cut = body.index("\U0001f600".encode()) + 2
    assert await _data([body[:cut], body[cut:]]) == ['"caf\u00e9 \u2014 \U0001f600"']


async def test_a_last_event_without_its_blank_line_is_still_delivered() -> None:
    assert await _data(b"data: tail") == ["tail"]


async def test_an_error_object_in_the_stream_raises_the_sdks_api_error() -> None:
    body = b'data: {"error": {"message": "overloaded", "type": "server_error"}}\n\n'
    with pytest.raises(openai.APIError, match="overloaded"):
        [chunk async for chunk in json_events(await _response(body))]


async def test_chunks_stop_at_done() -> None:
    body = b'data: {"choices": []}\n\ndata: [DONE]\n\ndata: {"late": true}\n\n'
    assert [chunk async for chunk in json_events(await _response(body))] == [{"choices": []}]


async def test_a_dropped_connection_raises_the_sdks_connection_error() -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield b"data: first\n\n"
        raise httpx2.RemoteProtocolError("peer closed connection")

    client = httpx2.AsyncClient(
        transport=httpx2.MockTransport(lambda request: httpx2.Response(200, content=broken()))
    )
    response = await client.send(client.build_request("GET", "http://provider.test/"), stream=True)
    received: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        async for data in event_data(response):
            received.append(data)
    assert received == ["first"]
