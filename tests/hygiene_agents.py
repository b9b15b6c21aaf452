"""Agents of the storage-hygiene specifications: one whose tool answers with megabytes, one
that keeps a few messages per session. Served by the test stacks (PERDURE_AGENTS)."""

from perdure import tool
from perdure.testing.agents.chat import ChatCompletionsAgent


class HoarderAgent(ChatCompletionsAgent):
    name = "hoarder"
    max_tool_output_bytes = 4_000_000

    @tool
    async def blob(self, kib: int) -> str:
        """Return `kib` KiB of data."""
        return "x" * (kib * 1024)


class ForgetfulAgent(ChatCompletionsAgent):
    name = "forgetful"
    max_persisted_messages = 3
