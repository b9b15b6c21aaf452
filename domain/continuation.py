"""Where a model step stands in the log, so a retried attempt continues instead of repeating."""

from dataclasses import dataclass
from typing import Any

from domain.reducer import Reduction


@dataclass(frozen=True)
class StepState:
    started: bool
    """An earlier attempt already opened this step (`start-step` is in the log)."""
    prior_parts: list[dict[str, Any]]
    """Parts of the assistant message before this step: the model sees them as history."""
    prefill: str | None
    """Text this step already streamed, which the model must continue."""
    open_text_id: str | None
    """The text part to keep appending to, when the interrupted attempt left it open."""


def step_state(reduction: Reduction, step: int) -> StepState:
    starts = [i for i, part in enumerate(reduction.parts) if part["type"] == "step-start"]
    if len(starts) <= step:
        return StepState(False, list(reduction.parts), None, None)
    begin = starts[step]
    current = reduction.parts[begin + 1 :]
    text = "".join(str(p.get("text", "")) for p in current if p["type"] == "text")
    return StepState(
        started=True,
        prior_parts=list(reduction.parts[:begin]),
        prefill=text or None,
        open_text_id=reduction.open_text_id if text else None,
    )
