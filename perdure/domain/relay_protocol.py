"""How a worker's provider adapters talk to the provider relay (`perdure relay`).

The relay holds each model step's HTTP stream to the provider, keeps what it received, and
reads on when the worker is gone; a retried step re-attaches by the step's identity and is
replayed the whole stream, skipping what its log already holds. docs/relay.md.

An adapter points its provider SDK at `<relay>/<provider>` (the SDK appends the API's own path)
with the relay's shared secret where the SDK puts its API key, and names the step's stream in
`STREAM_HEADER`. The relay answers exactly what the provider answered.
"""

from typing import Literal

RelayedProvider = Literal["openai", "anthropic"]
RELAYED_PATHS: dict[RelayedProvider, tuple[str, ...]] = {
    "openai": ("chat/completions",),
    "anthropic": ("v1/messages",),
}
"""The only requests the relay forwards (POST): it is not a proxy for anything else."""
STREAM_HEADER = "x-perdure-relay-stream"
"""The step's stream identity: the same on every attempt of the step."""
ATTACH_HEADER = "x-perdure-relay-attach"
"""`1`: re-attach to a held stream only; a stream the relay no longer holds is a 404
`stream_gone` (never a new provider request whose events would be skipped as if seen)."""
EARLY_HEADER = "x-perdure-relay-early"
"""`1`: a head start, sent by the gateway before the step runs. The step's own request adopts
it when it is the same request; it never replaces a stream the relay holds already."""
CLAIM_SECONDS = 30.0
"""How long the relay holds a head start for its step's request, by default; then it cancels
it (a head start costs at most that much of an answer nobody reads)."""
STREAM_ID_PATTERN = r"^[A-Za-z0-9_.:\-]{1,200}$"
CURSOR_PREFIX = "relay:"
"""A relayed stream's cursor (`ResponseCursor.response_id`) is `relay:<stream id>`; its
`sequence_number` counts the stream's SSE events from 0."""


def stream_id_of(message_id: str, step: int) -> str:
    """A model step's stream identity: its answer's message id and its step in the log."""
    return f"{message_id}:{step}"
