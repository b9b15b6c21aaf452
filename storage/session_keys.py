"""A session's storage key, apart from the chat id its client chose.

Chat ids are per tenant (two tenants may both have a chat `support-1`), so they cannot be the
primary key that every child table (messages, submissions, events, …) refers to. A session
created since migration 0008 is stored under `session_key(tenant, chat id)`; one created before
keeps its chat id as its key. So the outside always looks a session up by `(tenant_id,
chat_id)` and never recomputes the key: inside the store and the worker, the key is the id.
"""

import hashlib

KEY_PREFIX = "s_"
KEY_HEX_CHARS = 32


def session_key(tenant_id: str, chat_id: str) -> str:
    """Deterministic, so a concurrent creation of the same chat collides on the primary key
    (and the retry finds the winner's row)."""
    digest = hashlib.sha256(f"{tenant_id}\x00{chat_id}".encode()).hexdigest()
    return f"{KEY_PREFIX}{digest[:KEY_HEX_CHARS]}"
