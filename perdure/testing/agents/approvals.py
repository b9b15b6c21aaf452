"""Agents whose tools wait: approvals (always, per call, failing closed, expiring) and a
client-side tool. Served by the test stacks (PERDURE_AGENTS)."""

import os
import time
from datetime import timedelta
from pathlib import Path

from perdure import ClientTool, ToolContext, tool
from perdure.testing.agents.chat import ChatCompletionsAgent

tool_runs: list[str] = []
"""Every run of a gated tool in this process, as `name:argument`."""


def _record(run: str) -> None:
    """In this process, and in $PERDURE_TEST_TOOL_RUNS for tests of worker processes."""
    tool_runs.append(run)
    path = os.environ.get("PERDURE_TEST_TOOL_RUNS")
    if path:
        with Path(path).open("a") as record:
            record.write(f"{run}\n")


def broken_check(arguments: dict[str, object], ctx: ToolContext) -> bool:
    raise RuntimeError("this approval check is broken")


class ApprovalsAgent(ChatCompletionsAgent):
    name = "approvals"
    client_tools = (
        ClientTool(
            name="pick_color",
            description="Ask the user to pick a color in the browser.",
            parameters={
                "type": "object",
                "properties": {"prompt": {"type": "string"}},
                "required": ["prompt"],
            },
        ),
        ClientTool(
            name="pick_quickly",
            description="Ask the user; gives up after a second.",
            timeout=timedelta(seconds=1),
        ),
    )

    @tool(needs_approval=True, idempotent=False)
    async def delete_file(self, path: str) -> str:
        """Delete a file (asks first)."""
        _record(f"delete_file:{path}")
        return f"deleted {path}"

    @tool(needs_approval=lambda arguments, ctx: float(str(arguments["amount"])) > 100)
    async def refund(self, amount: float) -> str:
        """Refund an amount (a person approves refunds above 100)."""
        _record(f"refund:{amount}")
        return f"refunded {amount}"

    @tool(needs_approval=True, approval_timeout=timedelta(seconds=1))
    async def launch(self, target: str) -> str:
        """Launch (the approval expires after a second)."""
        _record(f"launch:{target}")
        return f"launched {target}"

    @tool(needs_approval=broken_check)
    async def guarded(self, what: str) -> str:
        """Its approval check is broken: it must ask rather than run."""
        _record(f"guarded:{what}")
        return f"done {what}"

    @tool(needs_approval=True)
    async def stamp(self, label: str) -> str:
        """Record when it starts (the approval benchmark times answer → tool started)."""
        _record(f"stamp:{label}:{time.time()}")
        return "stamped"
