"""A model step's provider stream through the relay: its cursor, and the skip on re-attach.

With `PERDURE_RELAY_URL` set, the Chat Completions and Anthropic adapters send each step's
request through the provider relay (`perdure relay`, docs/relay.md), which holds the provider's
stream beyond the worker. Every event read is counted; its cursor (`relay:<stream id>`, the
event's index) is stored with the chunks it produced, in the same transaction, as a Responses
cursor is. A retried step re-attaches (`ATTACH_HEADER`) and is sent the whole stream again:
the adapter reads every event (its parser needs the stream's start) and yields only what
follows the cursor. Nothing is generated twice and one provider request serves every attempt.

When the relay no longer holds the stream (it was restarted, or the stream expired), the
re-attach is a 404: the error is made final for this request, and the model step continues
from its log the way the provider allows (prefill or instruction), as after a lost Responses
response.
"""

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TypeVar

import httpx

from activities.providers.base import ModelRequest, ProviderError
from activities.providers.common import translate_errors
from activities.providers.config import ProviderConfig
from activities.providers.errors import is_sdk_error
from perdure.domain.provider_events import ProviderEvent, ResponseCursor, Unresumable
from perdure.domain.relay_protocol import (
    ATTACH_HEADER,
    CURSOR_PREFIX,
    EARLY_HEADER,
    STREAM_HEADER,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
CANCEL_TIMEOUT = httpx.Timeout(5.0)


@dataclass
class RelayedStream:
    """One attempt's view of its step's relayed stream (`stream_id` None: not relayed)."""

    stream_id: str | None
    after: int = -1
    """The last event the log already holds (-1: none): events up to it are not yielded."""
    index: int = -1
    early: bool = False
    """A head start (`ModelRequest.early`): never sent straight to the provider."""
    direct: bool = False
    """Sent straight to the provider because the relay could not be reached: its first events
    say so (`Unresumable`), as no cursor will follow them."""

    @classmethod
    def of(cls, request: ModelRequest, config: ProviderConfig) -> "RelayedStream":
        if config.relay_url is None or request.stream_id is None:
            return cls(stream_id=None)
        resume = request.resume
        if resume is not None and resume.response_id == CURSOR_PREFIX + request.stream_id:
            return cls(stream_id=request.stream_id, after=resume.sequence_number)
        return cls(stream_id=request.stream_id, early=request.early)

    @property
    def on(self) -> bool:
        return self.stream_id is not None

    @property
    def attaching(self) -> bool:
        return self.on and self.after >= 0

    def headers(self) -> dict[str, str]:
        if self.stream_id is None:
            return {}
        headers = {STREAM_HEADER: self.stream_id}
        if self.attaching:
            headers[ATTACH_HEADER] = "1"
        if self.early:
            headers[EARLY_HEADER] = "1"
        return headers

    def passed(self, produced: list[ProviderEvent]) -> list[ProviderEvent]:
        """Count one provider event; what it produced, followed by its cursor, unless the log
        already holds it (an event up to the re-attach's cursor)."""
        self.index += 1
        if self.index <= self.after:
            return []
        if self.stream_id is None:
            return [Unresumable(), *produced] if self.direct and self.index == 0 else produced
        cursor = ResponseCursor(
            response_id=CURSOR_PREFIX + self.stream_id, sequence_number=self.index
        )
        return [*produced, cursor]

    async def open(
        self, send: Callable[["RelayedStream"], Awaitable[T]], *, label: str, has_key: bool
    ) -> tuple[T, "RelayedStream"]:
        """`send(self)`; a relay that cannot be reached for a new stream is skipped (straight
        to the provider, with the worker's own key): the stream and how it is relayed."""
        try:
            return await send(self), self
        except Exception as error:
            unreachable = is_sdk_error(error, "APIConnectionError")
            if not unreachable or not self.on or self.attaching or self.early or not has_key:
                raise
        log.warning("the provider relay cannot be reached; %s goes direct", label)
        direct = RelayedStream(stream_id=None, direct=True)
        return await send(direct), direct


async def relayed_events(
    label: str, relayed: RelayedStream, events: AsyncGenerator[ProviderEvent, None]
) -> AsyncGenerator[ProviderEvent, None]:
    """`events`, their failures as `ProviderError`s. A re-attached stream that fails is not
    retried as it is: the step continues from its log by the provider's own continuation (a
    non-retryable error says so)."""
    try:
        async with aclosing(translate_errors(label, events)) as translated:
            async for event in translated:
                yield event
    except ProviderError as error:
        if not relayed.attaching or not error.retryable:
            raise
        raise ProviderError(
            f"the relay's copy of stream {relayed.stream_id} cannot be read on: {error}",
            retryable=False,
            status=error.status,
        ) from error


async def cancel_relayed(config: ProviderConfig, response_id: str) -> None:
    """Stop the provider's answer at the relay (a stop, an exhausted turn); best effort."""
    if config.relay_url is None or config.relay_secret is None:
        return
    stream_id = response_id.removeprefix(CURSOR_PREFIX)
    url = f"{config.relay_url.rstrip('/')}/streams/{stream_id}"
    secret = config.relay_secret.get_secret_value()
    async with httpx.AsyncClient(timeout=CANCEL_TIMEOUT) as http:
        response = await http.delete(url, headers={"authorization": f"Bearer {secret}"})
    if response.status_code not in (204, 404):
        raise ProviderError(
            f"the relay refused to cancel {stream_id}: HTTP {response.status_code}",
            retryable=False,
            status=response.status_code,
        )
