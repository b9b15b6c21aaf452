"""An agent that delegates to other agents (sub-agents). Served by the test stacks."""

from datetime import timedelta

from perdure import SubAgent, tool
from perdure.testing.agents.chat import ChatCompletionsAgent


class ManagerAgent(ChatCompletionsAgent):
    name = "manager"
    sub_agents = (
        SubAgent(
            name="research",
            agent="default",
            description="Ask the research agent; give it the whole task.",
        ),
        SubAgent(
            name="ask_approver",
            agent="approvals",
            description="Ask the agent whose tools need approval.",
        ),
    )


class WorkspaceLeadAgent(ChatCompletionsAgent):
    """Delegates work on its chat's files to sub-agents (docs/workspace.md): `editor`'s
    changes wait for approval, `helper`'s do not."""

    name = "workspace-lead"
    workspace_tools = ("read_file", "list_files")
    sub_agents = (
        SubAgent(
            name="editor",
            agent="workspace-guarded",
            description="Ask the editor to change a file; its changes wait for approval.",
        ),
        SubAgent(
            name="helper",
            agent="workspace",
            description="Ask the helper to work on the files.",
        ),
    )


class StrictAgent(ChatCompletionsAgent):
    """Refuses a message while its turn runs (the concurrency specifications)."""

    name = "strict"
    concurrency = "reject"


class DebouncingAgent(ChatCompletionsAgent):
    """Answers a burst of messages once, after 1.5 s without a new one."""

    name = "debouncing"
    concurrency = "debounce"
    debounce = timedelta(milliseconds=1500)


class CompactingAgent(ChatCompletionsAgent):
    """Compacts once what the model sees passes a small threshold (the compaction specs)."""

    name = "compacting"
    compact_after_tokens = 250
    compact_keep_messages = 2


class OverflowingAgent(ChatCompletionsAgent):
    """Compacts only when the provider says the context window is full."""

    name = "overflowing"
    compact_keep_messages = 2


class LongChatAgent(ChatCompletionsAgent):
    """A chat of many turns with large tool outputs (bench.long_chat): compaction keeps what
    the model sees bounded."""

    name = "long-chat"
    compact_after_tokens = 100_000
    compact_keep_messages = 4

    @tool
    async def blob(self, kb: int) -> str:
        """A tool output of `kb` kilobytes."""
        return "x" * (kb * 1024)
