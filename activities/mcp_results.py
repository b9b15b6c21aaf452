"""What an MCP call's result becomes: the output the model reads, the error it is told, or
the questions a person answers first (docs/mcp.md)."""

from typing import TYPE_CHECKING, Any

from activities.mcp_input import InputNotAnswerable, asked_by
from perdure.mcp_servers import McpServer

if TYPE_CHECKING:  # the SDK is imported at the worker's start (`import_mcp_sdk`)
    from mcp.types import CallToolResult, InputRequiredResult


class McpToolFailed(Exception):
    """The server ran the tool and reported an error (its text goes to the model)."""


def core_result(
    server: McpServer, tool: str, result: Any
) -> "CallToolResult | InputRequiredResult":
    """A call's result in the core protocol's shapes: the only extension result Perdure
    claims is a task (activities/mcp_tasks.py), taken care of before this."""
    from mcp.types import CallToolResult, InputRequiredResult

    if not isinstance(result, CallToolResult | InputRequiredResult):
        raise McpToolFailed(
            f"MCP server {server.name}: tool {tool}: an unexpected {type(result).__name__}"
        )
    return result


def state_only(result: "CallToolResult | InputRequiredResult") -> str | None:
    """The state of an `input_required` result that asks nothing (the call is made again at
    once, echoing it); None for any other result."""
    from mcp.types import InputRequiredResult

    if isinstance(result, InputRequiredResult) and not result.input_requests:
        return result.request_state
    return None


def call_output(
    server: McpServer, tool: str, result: "CallToolResult | InputRequiredResult"
) -> Any:
    from mcp.types import InputRequiredResult, TextContent

    if isinstance(result, InputRequiredResult):
        try:
            return asked_by(result, server, tool)
        except InputNotAnswerable as error:
            raise McpToolFailed(f"MCP server {server.name}: tool {tool}: {error}") from None

    texts = [item.text for item in result.content if isinstance(item, TextContent)]
    if result.is_error:
        raise McpToolFailed(
            f"MCP server {server.name}: tool {tool} failed: {'; '.join(texts) or 'no reason given'}"
        )
    if result.structured_content is not None:
        return result.structured_content
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return [item.model_dump(mode="json", exclude_none=True) for item in result.content]
