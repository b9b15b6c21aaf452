"""`@tool`: turn an agent method into a model tool with pydantic-validated arguments."""

import functools
import inspect
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic_core import to_jsonable_python

from perdure.domain.conversation import ToolSpec

ToolFunction = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class ToolContext:
    """Handed to a tool that declares a parameter annotated `ToolContext`, so it can scope
    what it reads and writes to the caller's tenant and session. Not part of the arguments
    the model sees."""

    tenant_id: str
    session_id: str
    submission_id: str
    tool_call_id: str
    agent: str


ApprovalCheck = Callable[[dict[str, Any], ToolContext], bool | Awaitable[bool]]
"""`needs_approval` as a function of the call: `(arguments, ctx) -> bool`, sync or async."""

DEFAULT_WAIT_TIMEOUT = timedelta(days=7)
"""How long a turn waits for an approval or a client tool's output before it goes on without."""
TOOL_NAME = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
"""What every provider accepts as a tool name (OpenAI: `^[a-zA-Z0-9_-]{1,64}$`)."""


class Tool(Protocol):
    """What a turn needs of any tool it offers the model: the agent's own (`ToolDefinition`)
    or an MCP server's (activities/mcp_toolbox.py)."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> ToolSpec: ...

    @property
    def idempotent(self) -> bool: ...

    @property
    def needs_approval(self) -> "bool | ApprovalCheck": ...

    @property
    def approval_timeout(self) -> timedelta: ...

    async def approval_needed(self, arguments: dict[str, Any], context: ToolContext) -> bool: ...

    async def invoke(
        self, owner: object, arguments: dict[str, Any], context: ToolContext
    ) -> Any: ...


class ToolArgumentsError(ValueError):
    """The model called a tool with arguments that do not match its signature."""


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    arguments: type[BaseModel]
    function: ToolFunction
    idempotent: bool
    needs_approval: bool | ApprovalCheck
    approval_timeout: timedelta = DEFAULT_WAIT_TIMEOUT
    context_parameter: str | None = None
    """The name of the parameter that receives the `ToolContext`, if the tool asks for one."""

    @functools.cached_property
    def spec(self) -> ToolSpec:
        """Built once per tool: a JSON schema costs milliseconds, and every model step sends it."""
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

    async def approval_needed(self, arguments: dict[str, Any], context: ToolContext) -> bool:
        if isinstance(self.needs_approval, bool):
            return self.needs_approval
        decided = self.needs_approval(arguments, context)
        if inspect.isawaitable(decided):
            decided = await decided
        return bool(decided)

    async def invoke(self, owner: object, arguments: dict[str, Any], context: ToolContext) -> Any:
        try:
            parsed = self.arguments.model_validate(arguments)
        except ValidationError as error:
            raise ToolArgumentsError(
                f"invalid arguments for {self.name}: {error.errors(include_url=False)}"
            ) from error
        values = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        if self.context_parameter is not None:
            values[self.context_parameter] = context
        return to_jsonable_python(await self.function(owner, **values))


def _context_parameter(function: ToolFunction) -> str | None:
    hints = get_type_hints(function)
    names = [name for name, hint in hints.items() if hint is ToolContext]
    if len(names) > 1:
        raise TypeError(f"tool {function.__name__}: at most one ToolContext parameter")
    return names[0] if names else None


def _arguments_model(function: ToolFunction) -> type[BaseModel]:
    hints = get_type_hints(function)
    fields: dict[str, Any] = {}
    context = _context_parameter(function)
    for name, parameter in list(inspect.signature(function).parameters.items())[1:]:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"tool {function.__name__}: *args/**kwargs are not supported")
        if name == context:
            continue
        annotation = hints.get(name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[name] = (annotation, default)
    config = ConfigDict(extra="forbid")
    model: type[BaseModel] = create_model(
        f"{function.__name__}_arguments", __config__=config, **fields
    )
    return model


def _checked_wait_timeout(owner: str, timeout: timedelta) -> timedelta:
    if timeout <= timedelta(0) or timeout > timedelta(days=365):
        raise ValueError(f"{owner}: the wait timeout must be above 0 and at most 365 days")
    return timeout


def _define(
    function: ToolFunction,
    *,
    name: str | None,
    idempotent: bool,
    needs_approval: bool | ApprovalCheck,
    approval_timeout: timedelta,
) -> ToolFunction:
    if not inspect.iscoroutinefunction(function):
        raise TypeError(f"tool {function.__name__} must be an async method")
    tool_name = name or function.__name__
    if not TOOL_NAME.match(tool_name):
        raise ValueError(f"tool {tool_name!r}: a name is 1-64 of A-Z a-z 0-9 _ -")
    if not isinstance(needs_approval, bool) and not callable(needs_approval):
        raise TypeError(f"tool {tool_name}: needs_approval is a bool or a callable")
    definition = ToolDefinition(
        name=tool_name,
        description=inspect.getdoc(function) or function.__name__,
        arguments=_arguments_model(function),
        function=function,
        idempotent=idempotent,
        needs_approval=needs_approval,
        approval_timeout=_checked_wait_timeout(f"tool {tool_name}", approval_timeout),
        context_parameter=_context_parameter(function),
    )
    function.__perdure_tool__ = definition  # type: ignore[attr-defined]
    return function


@overload
def tool(function: ToolFunction, /) -> ToolFunction: ...


@overload
def tool(
    *,
    name: str | None = None,
    idempotent: bool = True,
    needs_approval: bool | ApprovalCheck = False,
    approval_timeout: timedelta = DEFAULT_WAIT_TIMEOUT,
) -> Callable[[ToolFunction], ToolFunction]: ...


def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    idempotent: bool = True,
    needs_approval: bool | ApprovalCheck = False,
    approval_timeout: timedelta = DEFAULT_WAIT_TIMEOUT,
) -> ToolFunction | Callable[[ToolFunction], ToolFunction]:
    """Mark an async agent method as a tool; its docstring is the description.

    `idempotent=False` means a retry after a crash must not run it again: an interrupted call
    is reported to the model as an error instead. A parameter annotated `ToolContext` receives
    the caller's tenant and session.

    `needs_approval=True`, or a function `(arguments, ctx) -> bool` deciding per call, parks the
    turn until a person approves or denies the call (in band through the AI SDK, or by REST);
    a function that fails or passes the agent's `hook_timeout` means approval is needed. An
    unanswered call is denied after `approval_timeout`.
    """

    def decorate(inner: ToolFunction) -> ToolFunction:
        return _define(
            inner,
            name=name,
            idempotent=idempotent,
            needs_approval=needs_approval,
            approval_timeout=approval_timeout,
        )

    return decorate(function) if function is not None else decorate


@dataclass(frozen=True)
class ClientTool:
    """A tool the client runs (in the browser, say): the model may call it, the turn parks
    until the client sends its output (the AI SDK's `addToolOutput`, or REST), and an
    unanswered call ends as an error after `timeout`."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    """The JSON schema of the arguments object."""
    timeout: timedelta = DEFAULT_WAIT_TIMEOUT

    def __post_init__(self) -> None:
        if not TOOL_NAME.match(self.name):
            raise ValueError(f"client tool {self.name!r}: a name is 1-64 of A-Z a-z 0-9 _ -")
        if self.parameters.get("type") != "object":
            raise ValueError(f"client tool {self.name}: parameters must be an object schema")
        _checked_wait_timeout(f"client tool {self.name}", self.timeout)

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


def tool_definition(member: object) -> ToolDefinition | None:
    definition = getattr(member, "__perdure_tool__", None)
    return definition if isinstance(definition, ToolDefinition) else None


def capped_output(output: Any, limit: int) -> Any:
    """`output` itself when its JSON is at most `limit` bytes; otherwise its JSON cut to the
    limit, as text ending in a marker that says how much was kept (the model and the user see
    that it was cut)."""
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    size = len(text.encode())
    if size <= limit:
        return output
    kept = text.encode()[:limit].decode(errors="ignore")
    return f"{kept}\n[output truncated: {len(kept.encode())} of {size} bytes kept]"
