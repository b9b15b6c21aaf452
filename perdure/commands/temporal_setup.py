"""`perdure temporal-setup`: register Perdure's search attributes in the Temporal namespace."""

from temporalio.client import Client
from temporalio.service import RPCError

from perdure.domain.turn_labels import TURN_ATTRIBUTES
from perdure.runtime.settings import Settings
from perdure.runtime.temporal_connection import connection_options
from perdure.runtime.temporal_setup import TemporalSetupNeeded, add_search_attributes


async def temporal_setup(settings: Settings) -> str:
    """What it did. Idempotent: a namespace that has them all is left as it is."""
    namespace, address = settings.temporal_namespace, settings.temporal_address
    try:
        client = await Client.connect(address, namespace=namespace, **connection_options())
        added = await add_search_attributes(client, namespace)
    except RPCError as error:
        raise TemporalSetupNeeded(
            f"could not register the search attributes in namespace {namespace!r} at "
            f"{address}: {error.message} (on Temporal Cloud, add them as Keyword attributes "
            f"in the namespace's settings: {', '.join(k.name for k in TURN_ATTRIBUTES)})"
        ) from None
    except RuntimeError as error:  # the client could not connect
        raise TemporalSetupNeeded(f"could not reach Temporal at {address}: {error}") from None
    if added:
        return f"added to namespace {namespace!r} at {address}: {', '.join(added)} (Keyword)"
    return f"namespace {namespace!r} at {address} has Perdure's search attributes already"
