"""Perdure's search attributes in a Temporal namespace: checked when a worker or gateway starts,
added by `perdure temporal-setup` (docs/operations.md).

Without them Temporal refuses every start of a turn (INVALID_ARGUMENT, "no mapping defined
for search attribute …"), so a process says so at once, with the command that fixes it.
"""

import logging

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from perdure.domain.turn_labels import TURN_ATTRIBUTES

SETUP_COMMAND = "perdure temporal-setup"
KEYWORD = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
UNLISTABLE = frozenset({RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED})
"""A client that may not list search attributes (an API key scoped to a namespace, say)."""

log = logging.getLogger("perdure")


class TemporalSetupNeeded(RuntimeError):
    """The namespace lacks Perdure's search attributes (or has one with another type)."""


def setup_needed_message(namespace: str, missing: list[str]) -> str:
    return (
        f"the Temporal namespace {namespace!r} lacks Perdure's search attributes "
        f"({', '.join(missing)}): run `{SETUP_COMMAND}` once against it (docs/operations.md)"
    )


def search_attributes_missing(error: BaseException) -> bool:
    """`error` is Temporal refusing a start (or an upsert) for an unknown search attribute."""
    return (
        isinstance(error, RPCError)
        and error.status == RPCStatusCode.INVALID_ARGUMENT
        and "search attribute" in error.message.lower()
    )


async def _registered(client: Client, namespace: str) -> dict[str, IndexedValueType.ValueType]:
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    return dict(listed.custom_attributes)


def _missing(namespace: str, registered: dict[str, IndexedValueType.ValueType]) -> list[str]:
    """The names to add; raises when one exists with another type (no command fixes that)."""
    for key in TURN_ATTRIBUTES:
        found = registered.get(key.name)
        if found is not None and found != KEYWORD:
            raise TemporalSetupNeeded(
                f"the search attribute {key.name} of the Temporal namespace {namespace!r} is a "
                f"{IndexedValueType.Name(found).removeprefix('INDEXED_VALUE_TYPE_')}, "
                "not a Keyword: remove it, then run `perdure temporal-setup`"
            )
    return [key.name for key in TURN_ATTRIBUTES if key.name not in registered]


async def require_search_attributes(client: Client, namespace: str) -> None:
    """Raise `TemporalSetupNeeded` naming what is missing. A client that may not list them is
    let through with a warning: a start then fails with the same advice from the gateway."""
    try:
        registered = await _registered(client, namespace)
    except RPCError as error:
        if error.status not in UNLISTABLE:
            raise
        log.warning(
            "cannot check the search attributes of the Temporal namespace %r (%s); if turns "
            "fail to start, run `%s`",
            namespace,
            error.message,
            SETUP_COMMAND,
        )
        return
    missing = _missing(namespace, registered)
    if missing:
        raise TemporalSetupNeeded(setup_needed_message(namespace, missing))


async def add_search_attributes(client: Client, namespace: str) -> list[str]:
    """Add whichever of Perdure's search attributes the namespace lacks; return their names
    (none when it had them all: running it again changes nothing)."""
    missing = _missing(namespace, await _registered(client, namespace))
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=namespace, search_attributes=dict.fromkeys(missing, KEYWORD)
            )
        )
    return missing
