"""Decide, before streaming, whether a request is refused or carries a stream fault."""

from dataclasses import dataclass, field

from tests.fakeprovider.directives import Directives, Fault
from tests.fakeprovider.state import FakeState
from tests.fakeprovider.transcript import Transcript

PREFILL_REJECTED = "Prefilling assistant messages is not supported for this model."
"""`@reject_prefill`: Anthropic's answer for models without prefill (Claude Opus 4.6, as quoted
in public reports, e.g. docs.agno.com "append trailing user message": "Claude 4.6+ does not
support assistant message prefill")."""


@dataclass(frozen=True)
class Rejection:
    """An HTTP error; each wire format renders it as its own JSON error body."""

    status: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    param: str | None = None
    """OpenAI's `error.param` (e.g. `messages.[3].role`)."""
    code: str | None = None
    """OpenAI's `error.code` (e.g. `unknown_parameter`); None renders the status default."""


def screen(
    state: FakeState, transcript: Transcript, directives: Directives
) -> Rejection | Fault | None:
    """A refusal, or the stream fault to apply (spending its budget), or None for a clean run."""
    if directives.reject_prefill and transcript.prefill is not None:
        return Rejection(400, PREFILL_REJECTED)
    fault = state.take_fault(transcript.user_text, directives.faults)
    if fault is None or fault.kind != "fail":
        return fault
    headers: dict[str, str] = {}
    if fault.retry_after is not None:
        headers["retry-after"] = fault.retry_after
    if fault.retry_after_ms is not None:
        headers["retry-after-ms"] = fault.retry_after_ms
    return Rejection(fault.status, f"Simulated failure with HTTP {fault.status}.", headers)
