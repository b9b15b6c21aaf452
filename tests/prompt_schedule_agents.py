"""Agents the prompt schedule specifications serve
(PERDURE_AGENTS=tests.prompt_schedule_agents): offline (`demo` model), one of them with a
declared schedule."""

from perdure import PromptSchedule, tool
from perdure.default_agent import DefaultAgent, calculate_expression

DECLARED = PromptSchedule(
    id="new-year",
    prompt="Happy new year: what changed since last year?",
    session_id="new-year-letters",
    cron="0 0 1 1 *",  # once a year: it never fires by itself while the tests run
    timezone="Europe/Paris",
)


class Scheduler(DefaultAgent):
    name = "scheduler"
    model = "demo"
    schedules = (DECLARED,)


class Helper(DefaultAgent):
    name = "helper"
    model = "demo"


class Refuser(DefaultAgent):
    """Refuses a message while a turn runs; its calculations wait for an approval (so a turn
    can be kept running for as long as a test needs)."""

    name = "refuser"
    model = "demo"
    concurrency = "reject"

    @tool(needs_approval=True)
    async def calculate(self, expression: str) -> float | int:
        """Evaluate an arithmetic expression such as `12 * (3 + 4)`."""
        return calculate_expression(expression)


class Interrupter(Refuser):
    """A new message stops the running turn (one parked on an approval, say) and is answered."""

    name = "interrupter"
    concurrency = "interrupt"
