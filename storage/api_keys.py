"""API keys in the store: made, listed and revoked by `perdure keys`, looked up by the gateway.

A key is `pk_` and 43 characters of `secrets.token_urlsafe(32)` (256 random bits). Only its
SHA-256 is stored. A fast hash is right here: a slow one (bcrypt, argon2) protects guessable
passwords, but nobody can enumerate 2**256 random keys, so the hash only has to be one-way, and
a fast one keeps the per-request lookup cheap. The lookup is by that hash, through a unique
index: no scan, nothing compared key by key.

There is no cache: every request reads the store, so a revocation holds on the next request, on
every gateway.
"""

import hashlib
import secrets
import uuid
from dataclasses import dataclass

from sqlalchemy import or_, update
from sqlmodel import Session, col, select

from perdure.domain.access import checked_tenant
from storage.access_tables import ApiKeyRow
from storage.db import Database
from storage.timing import now

KEY_PREFIX = "pk_"
KEY_RANDOM_BYTES = 32
DISPLAY_CHARS = len(KEY_PREFIX) + 6
"""What `perdure keys list` shows of a key: 36 bits of it, to recognise, never to use."""
LAST_USED_GRANULARITY = 60.0
"""Seconds: `last_used_at` is written at most this often per key, not on every request."""
MAX_NAME_CHARS = 200


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class CreatedKey:
    row: ApiKeyRow
    key: str
    """The key itself: shown once to whoever created it, never stored."""


async def create_key(db: Database, *, tenant_id: str, name: str | None = None) -> CreatedKey:
    checked_tenant(tenant_id)
    if name is not None and not 1 <= len(name) <= MAX_NAME_CHARS:
        raise ValueError(f"a key's name must be 1-{MAX_NAME_CHARS} characters")
    key = KEY_PREFIX + secrets.token_urlsafe(KEY_RANDOM_BYTES)
    row = ApiKeyRow(
        id=f"key_{uuid.uuid4().hex[:16]}",
        key_hash=key_hash(key),
        prefix=key[:DISPLAY_CHARS],
        tenant_id=tenant_id,
        name=name,
        created_at=now(),
    )
    async with db.write() as session:
        session.add(row)
    return CreatedKey(row=row, key=key)


async def list_keys(db: Database) -> list[ApiKeyRow]:
    async with db.read() as session:
        rows = await session.exec(
            select(ApiKeyRow).order_by(col(ApiKeyRow.tenant_id), col(ApiKeyRow.created_at))
        )
        return list(rows.all())


async def revoke_key(db: Database, *, key_id: str) -> ApiKeyRow | None:
    """The key, revoked from now on (revoking again keeps the first time); None if unknown."""
    async with db.write() as session:
        row = await session.get(ApiKeyRow, key_id)
        if row is not None and row.revoked_at is None:
            row.revoked_at = now()
            session.add(row)
        return row


async def any_stored_key(db: Database) -> bool:
    """Whether the store has ever held a key, revoked or not: then every request must bring
    one. Revoked keys count, so revoking the last key never opens a gateway by surprise."""
    statement = select(ApiKeyRow.id).limit(1)
    found = await db.read_connection(lambda connection: connection.execute(statement).first())
    return found is not None


async def find_key(db: Database, presented: str) -> ApiKeyRow | None:
    """The stored key `presented` is, revoked or not; None if it is none of them."""
    digest = key_hash(presented)
    row = await db.read_sync(
        lambda session: session.exec(select(ApiKeyRow).where(ApiKeyRow.key_hash == digest)).first()
    )
    if row is not None and row.revoked_at is None:
        at = now()
        if row.last_used_at is None or at - row.last_used_at >= LAST_USED_GRANULARITY:
            await _touch(db, row.id, at)
    return row


async def _touch(db: Database, key_id: str, at: float) -> None:
    """One conditional statement: of gateways that race here, one writes and the others match
    no row."""

    def touch(session: Session) -> None:
        session.exec(
            update(ApiKeyRow)
            .where(
                col(ApiKeyRow.id) == key_id,
                or_(
                    col(ApiKeyRow.last_used_at).is_(None),
                    col(ApiKeyRow.last_used_at) <= at - LAST_USED_GRANULARITY,
                ),
            )
            .values(last_used_at=at)
        )

    await db.transact(touch)
