"""`@tool`: turn an agent method into a model tool with pydantic-validated arguments."""

import functools
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic_core import to_jsonable_python

from domain.conversation import ToolSpec

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


class ToolArgumentsError(ValueError):
    """The model called a tool with arguments that do not match its signature."""


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    arguments: type[BaseModel]
    function: ToolFunction
    idempotent: bool
    needs_approval: bool
    context_parameter: str | None = None
    """The name of the parameter that receives the `ToolContext`, if the tool asks for one."""

    @functools.cached_property
    def spec(self) -> ToolSpec:
        """Built once per tool: a JSON schema costs milliseconds, and every model step sends it."""
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

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


def _define(
    function: ToolFunction, *, name: str | None, idempotent: bool, needs_approval: bool
) -> ToolFunction:
    if not inspect.iscoroutinefunction(function):
        raise TypeError(f"tool {function.__name__} must be an async method")
    definition = ToolDefinition(
        name=name or function.__name__,
        description=inspect.getdoc(function) or function.__name__,
        arguments=_arguments_model(function),
        function=function,
        idempotent=idempotent,
        needs_approval=needs_approval,
        context_parameter=_context_parameter(function),
    )
    function.__perdure_tool__ = definition  # type: ignore[attr-defined]
    return function


@overload
def tool(function: ToolFunction, /) -> ToolFunction: ...


@overload
def tool(
    *, name: str | None = None, idempotent: bool = True, needs_approval: bool = False
) -> Callable[[ToolFunction], ToolFunction]: ...


def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    idempotent: bool = True,
    needs_approval: bool = False,
) -> ToolFunction | Callable[[ToolFunction], ToolFunction]:
    """Mark an async agent method as a tool; its docstring is the description.

    `idempotent=False` means a retry after a crash must not run it again: an interrupted call
    is reported to the model as an error instead. A parameter annotated `ToolContext` receives
    the caller's tenant and session. `needs_approval=True` is refused when the agent loads:
    tool approvals are not supported yet.
    """
    if function is not None:
        return _define(function, name=name, idempotent=idempotent, needs_approval=needs_approval)

    def decorate(inner: ToolFunction) -> ToolFunction:
        return _define(inner, name=name, idempotent=idempotent, needs_approval=needs_approval)

    return decorate


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
