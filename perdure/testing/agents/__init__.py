"""Agents the tests and the benchmarks serve: the default agent and its variants for every
provider API and recovery hook (`chat`), agents whose tools wait for a person or the browser
(`approvals`), and agents that delegate, refuse, debounce or compact (`delegating`).

Worker processes load them by module path (`PERDURE_AGENTS`); importing this package imports
none of them. Their `name`s never change: recorded histories and stored rows refer to them."""

MODULES = (
    "perdure.testing.agents.chat",
    "perdure.testing.agents.approvals",
    "perdure.testing.agents.delegating",
)
PERDURE_AGENTS = ",".join(MODULES)
"""The `PERDURE_AGENTS` value that serves every agent of this package."""
