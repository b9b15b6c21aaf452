"""Message trees written straight into a store, for specifications of how paths are read."""

import uuid

from storage.db import Database
from storage.tables import ChatSessionRow, MessageRow


async def tree(store: Database, edges: list[tuple[str, str | None]], leaf: str) -> str:
    """A session whose messages are `edges` (id, parent), created in that order."""
    session_id = f"tree-{uuid.uuid4().hex[:12]}"
    async with store.write() as session:
        session.add(
            ChatSessionRow(
                id=session_id,
                tenant_id="t",
                chat_id=session_id,
                agent="a",
                leaf_message_id=leaf,
                created_at=1.0,
                updated_at=1.0,
            )
        )
        for order, (message_id, parent) in enumerate(edges):
            session.add(
                MessageRow(
                    session_id=session_id,
                    id=message_id,
                    parent_id=parent,
                    role="user" if order % 2 == 0 else "assistant",
                    created_at=10.0 + order,
                )
            )
    return session_id


def chain(count: int, prefix: str = "m") -> list[tuple[str, str | None]]:
    ids = [f"{prefix}{i}" for i in range(count)]
    return [(ids[i], ids[i - 1] if i else None) for i in range(count)]
