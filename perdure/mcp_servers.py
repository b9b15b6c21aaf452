"""MCP servers an agent takes tools from: declarations only (the worker connects, see
activities/mcp_toolbox.py; docs/mcp.md)."""

import fnmatch
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

SERVER_NAME = re.compile(r"^[A-Za-z0-9-]{1,20}$")
"""No underscore: `<server>__<tool>` then splits one way only."""
SEPARATOR = "__"
MAX_TOOL_NAME = 64
"""What every provider accepts (OpenAI and Anthropic: 64 characters)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
ServerKey = tuple[
    str, tuple[str, ...], str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]
]


@dataclass(frozen=True, eq=False)
class McpServer:
    """An MCP server whose tools an agent's model may call, as `<name>__<tool>`.

    One of: `command`, a stdio server, the program and its arguments, started by each worker
    and kept running (it gets only the environment variables named in `env_from_env`, besides
    the MCP SDK's own minimal set); or `url`, a streamable HTTP server, sent the headers named
    in `headers_from_env` with values read from the worker's environment (docs/mcp.md).

    `idempotent`, `not_idempotent` and `needs_approval` are tool names or shell-style patterns
    (`delete_*`): an idempotent tool's call is retried after a worker crash, any other is never
    run twice (the model is told it was interrupted); a call that needs approval parks the turn
    as any tool's does. A tool the server marks `readOnlyHint` or `idempotentHint` is
    idempotent unless it matches `not_idempotent`, which wins over `idempotent` too (its hints
    are the server's word: `not_idempotent=("*",)` ignores them). `list_max_age`: how long a
    worker keeps a tool list before reading it again (and whenever it connects again).
    `call_timeout`: a call that takes longer is a tool error for the model. `input_timeout`:
    how long a turn waits for a person to answer a question the server asks mid-call (the
    2026-07-28 `input_required` result; docs/mcp.md#input-required). `task_timeout`: how long
    a call the server runs as a task is followed (docs/mcp.md#tasks).
    """

    name: str
    command: Sequence[str] = ()
    env_from_env: Mapping[str, str] = field(default_factory=dict)
    """The server's environment variable → the worker's variable it is read from."""
    url: str | None = None
    headers_from_env: Mapping[str, str] = field(default_factory=dict)
    """An HTTP header → the worker's environment variable its value is read from."""
    idempotent: Sequence[str] = ()
    not_idempotent: Sequence[str] = ()
    needs_approval: bool | Sequence[str] = ()
    list_max_age: timedelta = timedelta(minutes=5)
    call_timeout: timedelta = timedelta(seconds=60)
    approval_timeout: timedelta = timedelta(days=7)
    input_timeout: timedelta = timedelta(minutes=10)
    """The MCP SDK's default lifetime of a server's request state: an answer later than the
    server keeps its state is refused by the server anyway."""
    task_timeout: timedelta = timedelta(minutes=9)
    """How long a call the server turns into a task is followed (`tasks/get`) before it is
    cancelled and the model told: within the 10 minutes a tool call may take
    (docs/mcp.md#tasks)."""

    def __post_init__(self) -> None:
        where = f"MCP server {self.name!r}"
        if not SERVER_NAME.match(self.name):
            raise ValueError(f"{where}: a name is 1-20 of A-Z a-z 0-9 -")
        if (self.url is None) == (not self.command):
            raise ValueError(f"{where}: give either `command` (stdio) or `url` (HTTP)")
        if self.url is None and (
            isinstance(self.command, str)
            or not all(isinstance(part, str) and part for part in self.command)
        ):
            raise ValueError(f"{where}: `command` is a non-empty list of strings")
        if self.url is not None and not re.match(r"^https?://[^\s/]+", self.url):
            raise ValueError(f"{where}: `url` is an http:// or https:// URL")
        if self.url is not None and self.env_from_env:
            raise ValueError(f"{where}: `env_from_env` is for a stdio server (`command`)")
        if self.url is None and self.headers_from_env:
            raise ValueError(f"{where}: `headers_from_env` is for an HTTP server (`url`)")
        for label, patterns in (
            ("idempotent", self.idempotent),
            ("not_idempotent", self.not_idempotent),
        ):
            if isinstance(patterns, str) or not all(isinstance(p, str) and p for p in patterns):
                raise ValueError(f"{where}: `{label}` is a list of tool names or patterns")
        both = sorted(set(self.idempotent) & set(self.not_idempotent))
        if both:
            raise ValueError(
                f"{where}: {', '.join(both)} is both `idempotent` and `not_idempotent`"
            )
        for label, limit, most in (
            ("list_max_age", self.list_max_age, timedelta(days=1)),
            ("call_timeout", self.call_timeout, timedelta(minutes=10)),
            ("approval_timeout", self.approval_timeout, timedelta(days=365)),
            ("input_timeout", self.input_timeout, timedelta(days=365)),
            ("task_timeout", self.task_timeout, timedelta(minutes=9)),
        ):
            if not timedelta(0) < limit <= most:
                raise ValueError(f"{where}: {label} must be above 0 and at most {most}")

    @property
    def key(self) -> ServerKey:
        """What identifies the server process a worker keeps (a declaration holds lists)."""
        return (
            self.name,
            tuple(self.command),
            self.url or "",
            tuple(sorted(self.env_from_env.items())),
            tuple(sorted(self.headers_from_env.items())),
        )

    def is_idempotent(self, tool: str, *, hinted: bool = False) -> bool:
        """Whether a call of `tool` is run again after a crash; `hinted`: the server marks the
        tool `readOnlyHint` or `idempotentHint`."""
        if _matches(tool, self.not_idempotent):
            return False
        return hinted or _matches(tool, self.idempotent)

    def needs_approval_for(self, tool: str) -> bool:
        if isinstance(self.needs_approval, bool):
            return self.needs_approval
        return _matches(tool, self.needs_approval)


def _matches(tool: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(tool, pattern) for pattern in patterns)


def exposed_name(server: str, tool: str) -> str:
    """The name the model sees for `tool` of `server`: the provider's characters only, at most
    64 of them (a long one ends with a hash of the whole, so two never meet)."""
    name = f"{server}{SEPARATOR}{_UNSAFE.sub('_', tool)}"
    if len(name) <= MAX_TOOL_NAME and name == f"{server}{SEPARATOR}{tool}":
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - 9]}_{digest}"


def check_servers(agent: str, servers: Sequence[McpServer], own_tools: Sequence[str]) -> None:
    """An agent's servers: unique names, and none whose tools could take an own tool's name."""
    seen: set[str] = set()
    for server in servers:
        if not isinstance(server, McpServer):
            raise TypeError(f"agent {agent}: mcp_servers holds McpServer declarations")
        if server.name in seen:
            raise ValueError(f"agent {agent}: two MCP servers are named {server.name!r}")
        seen.add(server.name)
        prefix = f"{server.name}{SEPARATOR}"
        clashing = [name for name in own_tools if name.startswith(prefix)]
        if clashing:
            raise ValueError(
                f"agent {agent}: tool {clashing[0]!r} starts with {prefix!r}, the prefix of "
                f"MCP server {server.name!r}'s tools"
            )
