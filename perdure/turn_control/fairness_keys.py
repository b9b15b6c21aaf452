"""A tenant's fairness key, as Temporal takes it (at most 64 bytes)."""

import hashlib

MAX_FAIRNESS_KEY_BYTES = 64


def fairness_key(tenant_id: str) -> str:
    """The tenant's fairness key: its id, or, for an id over Temporal's 64 bytes, a prefix of
    it with a hash of the whole (two tenants never share a key)."""
    encoded = tenant_id.encode()
    if len(encoded) <= MAX_FAIRNESS_KEY_BYTES:
        return tenant_id
    digest = hashlib.sha256(encoded).hexdigest()[:16]
    return f"{encoded[:40].decode(errors='ignore')}~{digest}"
