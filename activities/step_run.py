"""One attempt of one model step: what its parts (opening, recovery, the provider call) share."""

from dataclasses import dataclass

from activities.providers import Provider
from activities.step_log import StepLog
from perdure.agent import Agent, TurnContext
from perdure.domain.payloads import ModelStepInput
from storage.log_appender import BufferedLog
from storage.step_inputs import StepInputs
from storage.tables import SubmissionRow


@dataclass(frozen=True)
class StepRun:
    agent: Agent
    step: ModelStepInput
    inputs: StepInputs
    steplog: StepLog
    """The answer's log as this attempt sees it; its chunks go out through `writer`."""
    provider: Provider
    model: str
    """The model spec (`openai:gpt-4.1-mini`)."""
    context: TurnContext
    attempt: int
    """Temporal's attempt of the activity: above 1 it is a recovery."""
    round: int = 0
    """Tool rounds this attempt ran itself before this model call (activities/step_rounds.py)."""

    @property
    def submission(self) -> SubmissionRow:
        return self.inputs.submission

    @property
    def writer(self) -> BufferedLog:
        return self.steplog.writer

    @property
    def recovering(self) -> bool:
        """A retried step's first model call: the one that recovers (its rounds follow it)."""
        return self.attempt > 1 and self.round == 0
