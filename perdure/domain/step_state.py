"""Where a model step stands in the log, so a retried attempt continues instead of repeating."""

from dataclasses import dataclass
from typing import Any

from perdure.domain.reducer import Reduction
from perdure.domain.repair import is_tool_part


@dataclass(frozen=True)
class StepState:
    started: bool
    """An earlier attempt already opened this step (`start-step` is in the log)."""
    finished: bool
    """That attempt also closed it (`finish-step`): only its result is missing."""
    prior_parts: list[dict[str, Any]]
    """Parts of the assistant message before this step: the model sees them as history."""
    current_parts: list[dict[str, Any]]
    prefill: str | None
    """Text this step already streamed, which the model must continue."""
    open_text_id: str | None
    """The text part to keep appending to, when the interrupted attempt left it open."""

    @property
    def has_tool_calls(self) -> bool:
        return any(is_tool_part(part) for part in self.current_parts)


def step_state(reduction: Reduction, step: int) -> StepState:
    """The state of step `step`; a repaired step may have added steps, so the current step is
    always the last one opened."""
    if reduction.steps <= step:
        return StepState(False, False, list(reduction.parts), [], None, None)
    begin = max(i for i, part in enumerate(reduction.parts) if part["type"] == "step-start")
    current = reduction.parts[begin + 1 :]
    text = "".join(str(p.get("text", "")) for p in current if p["type"] == "text")
    return StepState(
        started=True,
        finished=not reduction.step_open,
        prior_parts=list(reduction.parts[:begin]),
        current_parts=current,
        prefill=text or None,
        open_text_id=reduction.open_text_id if text else None,
    )
