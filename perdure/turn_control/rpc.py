"""Temporal RPC failures that mean "not now", not "no": the call may be made again."""

from temporalio.service import RPCStatusCode

TRANSIENT_RPC_STATUSES = frozenset(
    {
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        # The server gave up on the call (a busy one may): nothing was done.
        RPCStatusCode.CANCELLED,
    }
)
