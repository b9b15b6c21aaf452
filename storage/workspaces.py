"""Session workspaces in the store: each session's files, bounded, versioned, scoped to the
session (and so to its tenant), deleted with it and copied by a fork. docs/workspace.md.

Every change takes the workspace's row for its transaction (`FOR UPDATE` on PostgreSQL;
SQLite has one writer), so changes to one workspace apply one at a time: a change that names
the version it expects of a file fails with `VersionConflict` when another came first, never
overwriting it. A change made with an id (a tool call's) is recorded with its result: made
again, it changes nothing and answers the same (exactly once, whatever retried it).
"""

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete
from sqlalchemy import select as select_columns
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from perdure.domain.workspace_rules import WorkspaceLimits, checked_path
from storage.db import Database
from storage.errors import BlobMissing, FileNotFound, FileTooLarge, VersionConflict, WorkspaceFull
from storage.timing import now
from storage.workspace_blobs import SWEEP_GRACE_SECONDS, BlobDirectory
from storage.workspace_tables import (
    WorkspaceChangeRow,
    WorkspaceFileRow,
    WorkspaceRow,
    WorkspaceSeenRow,
)

ABSENT = 0
"""`expected_version` of a file that must not exist yet."""


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    sha256: str
    version: int
    updated_at: float


@dataclass(frozen=True)
class StoredFile:
    path: str
    content: bytes
    version: int


@dataclass(frozen=True)
class Listing:
    version: int
    total_bytes: int
    files: list[FileInfo]


Describe = Callable[[bytes | None, bytes | None, int], dict[str, Any]]
"""`(content before, content after, workspace version after) -> the change's result`: built
inside the change's transaction, recorded with its id, answered again to a retry."""


def _plain(before: bytes | None, after: bytes | None, version: int) -> dict[str, Any]:
    return {"version": version, "created": before is None, "deleted": after is None}


async def list_files(db: Database, *, session_id: str) -> Listing:
    async with db.read() as session:
        workspace = await session.get(WorkspaceRow, session_id)
        connection = await session.connection()
        rows = await connection.execute(
            select_columns(
                col(WorkspaceFileRow.path),
                col(WorkspaceFileRow.size),
                col(WorkspaceFileRow.sha256),
                col(WorkspaceFileRow.version),
                col(WorkspaceFileRow.updated_at),
            )
            .where(col(WorkspaceFileRow.session_id) == session_id)
            .order_by(col(WorkspaceFileRow.path))
        )
        files = [FileInfo(*row) for row in rows]
    if workspace is None:
        return Listing(version=0, total_bytes=0, files=[])
    return Listing(version=workspace.version, total_bytes=workspace.total_bytes, files=files)


async def read_files(
    db: Database,
    *,
    session_id: str,
    matching: Callable[[str], bool],
    blobs: BlobDirectory | None = None,
) -> dict[str, bytes]:
    """The contents of the files whose names `matching` accepts, by name."""
    async with db.read() as session:
        rows = await session.exec(
            select(WorkspaceFileRow.path, WorkspaceFileRow.content, WorkspaceFileRow.blob)
            .where(WorkspaceFileRow.session_id == session_id)
            .order_by(col(WorkspaceFileRow.path))
        )
        found = [(path, content, blob) for path, content, blob in rows if matching(path)]
    contents: dict[str, bytes] = {}
    for path, content, blob in found:
        try:
            contents[path] = await _content(content, blob, blobs)
        except BlobMissing:  # changed and swept meanwhile: read it again, alone
            with contextlib.suppress(FileNotFound):
                again = await read_file(db, session_id=session_id, path=path, blobs=blobs)
                contents[path] = again.content
    return contents


async def read_file(
    db: Database, *, session_id: str, path: str, blobs: BlobDirectory | None = None
) -> StoredFile:
    checked_path(path)
    try:
        return await _read_once(db, session_id, path, blobs)
    except BlobMissing:
        # A change and a sweep between reading the row and its blob: the row is new now.
        return await _read_once(db, session_id, path, blobs)


async def _read_once(
    db: Database, session_id: str, path: str, blobs: BlobDirectory | None
) -> StoredFile:
    async with db.read() as session:
        row = await session.get(WorkspaceFileRow, (session_id, path))
    if row is None:
        raise FileNotFound(f"no file {path!r} in this session's workspace")
    return StoredFile(path, await _content(row.content, row.blob, blobs), row.version)


async def _content(content: bytes, blob: str | None, blobs: BlobDirectory | None) -> bytes:
    if blob is None:
        return content
    if blobs is None:
        raise BlobMissing(
            "the file is in the workspace's blob directory, and this process has none: set "
            "PERDURE_WORKSPACE_BLOB_DIR as the other gateways and workers do"
        )
    return await asyncio.to_thread(blobs.get, blob)


async def sweep_blobs(
    db: Database, blobs: BlobDirectory, *, grace: float = SWEEP_GRACE_SECONDS
) -> int:
    """Delete the blobs no file names any more (deleted, overwritten, their session gone, a
    change that never committed) once older than `grace` seconds; returns how many."""
    cutoff = time.time() - grace  # taken before the names are read: see `BlobDirectory.sweep`
    async with db.read() as session:
        rows = await session.exec(
            select(WorkspaceFileRow.blob).where(col(WorkspaceFileRow.blob).is_not(None))
        )
        named = {blob for blob in rows.all() if blob is not None}
    return await asyncio.to_thread(blobs.sweep, named, cutoff=cutoff)


Change = Callable[[bytes | None], bytes | None]
"""The file's content before (None: absent) → after (None: deleted); may raise `StoreError`."""


async def change_file(
    db: Database,
    *,
    tenant_id: str,
    session_id: str,
    path: str,
    change: Change,
    limits: WorkspaceLimits,
    expected_version: int | None = None,
    change_id: str | None = None,
    seen_by: str | None = None,
    describe: Describe = _plain,
    blobs: BlobDirectory | None = None,
) -> dict[str, Any]:
    """The one transaction that changes a file: `expected_version` None changes whatever is
    there, `ABSENT` only an absent file, another number only the file at that version;
    `change_id` makes it once; `seen_by` (a turn's submission) notes the version it leaves,
    as the turn's own view of the file; `blobs` takes contents past its size (written before
    the commit, so no committed row names a missing blob). Returns `describe`'s result."""
    checked_path(path)
    async with db.write() as session:
        done = await _done(session, session_id, change_id)
        if done is not None:
            return done
        workspace = await _locked_workspace(session, db, tenant_id, session_id)
        current = await session.get(WorkspaceFileRow, (session_id, path))
        _check_expected(path, current, expected_version)
        before = None if current is None else await _content(current.content, current.blob, blobs)
        after = change(before)
        if after is None and current is None:
            raise FileNotFound(f"no file {path!r} in this session's workspace")
        _check_bounds(path, workspace, current, after, limits)
        at = now()
        workspace.version += 1
        workspace.total_bytes += (len(after) if after is not None else 0) - (
            current.size if current is not None else 0
        )
        workspace.file_count += (after is not None) - (current is not None)
        workspace.updated_at = at
        session.add(workspace)
        if after is None:
            assert current is not None
            await session.delete(current)
        else:
            row = current or WorkspaceFileRow(
                session_id=session_id, path=path, content=b"", size=0, sha256="", version=0,
                updated_at=at,
            )  # fmt: skip
            if blobs is not None and blobs.holds(after):
                row.content, row.blob = b"", await asyncio.to_thread(blobs.put, after)
            else:
                row.content, row.blob = after, None
            row.size = len(after)
            row.sha256 = hashlib.sha256(after).hexdigest()
            row.version, row.updated_at = workspace.version, at
            session.add(row)
        if seen_by is not None:
            await _note_seen(session, db, session_id, seen_by, path, workspace.version)
        result = describe(before, after, workspace.version)
        return _recorded(session, session_id, change_id, result)


async def seen_version(db: Database, *, submission_id: str, path: str) -> int | None:
    """The version of `path` a turn last read or left (`ABSENT`: it saw none); None: never."""
    async with db.read() as session:
        row = await session.get(WorkspaceSeenRow, (submission_id, path))
    return row.version if row is not None else None


async def note_seen(
    db: Database, *, session_id: str, submission_id: str, path: str, version: int
) -> None:
    async with db.write() as session:
        await _note_seen(session, db, session_id, submission_id, path, version)


async def _note_seen(
    session: AsyncSession,
    db: Database,
    session_id: str,
    submission_id: str,
    path: str,
    version: int,
) -> None:
    insert = sqlite_insert if db.is_sqlite else pg_insert
    statement = insert(WorkspaceSeenRow).values(
        submission_id=submission_id, path=path, session_id=session_id, version=version
    )
    connection = await session.connection()
    await connection.execute(
        statement.on_conflict_do_update(
            index_elements=["submission_id", "path"], set_={"version": version}
        )
    )


def _check_bounds(
    path: str,
    workspace: WorkspaceRow,
    current: WorkspaceFileRow | None,
    after: bytes | None,
    limits: WorkspaceLimits,
) -> None:
    if after is None:
        return
    if len(after) > limits.max_file_bytes:
        raise FileTooLarge(
            f"{path!r} would be {len(after)} bytes; a file is at most {limits.max_file_bytes}"
        )
    total = workspace.total_bytes - (current.size if current is not None else 0) + len(after)
    if total > limits.max_total_bytes:
        raise WorkspaceFull(
            f"writing {path!r} would make the workspace {total} bytes; it holds at most "
            f"{limits.max_total_bytes}"
        )
    if current is None and workspace.file_count + 1 > limits.max_files:
        raise WorkspaceFull(f"the workspace holds at most {limits.max_files} files")


async def copy_workspace(session: AsyncSession, *, from_session: str, to_session: str) -> None:
    """Inside the caller's transaction (a fork's): `to_session` starts with a copy of every
    file of `from_session`, at the same versions."""
    # Locked, so a deletion of the source waits for the copy: a sweep never misses the
    # blobs the copy names (storage/workspace_blobs.py).
    source = (
        await session.exec(
            select(WorkspaceRow).where(WorkspaceRow.session_id == from_session).with_for_update()
        )
    ).first()
    if source is None:
        return
    # Every column copied but the owner (and the copy's time): a column added later is too.
    session.add(
        WorkspaceRow(**{**source.model_dump(), "session_id": to_session, "updated_at": now()})
    )
    rows = await session.exec(
        select(WorkspaceFileRow).where(WorkspaceFileRow.session_id == from_session)
    )
    for row in rows.all():
        session.add(WorkspaceFileRow(**{**row.model_dump(), "session_id": to_session}))


async def delete_workspaces(session: AsyncSession, session_ids: list[str]) -> None:
    """Inside the caller's transaction (a session's deletion). The blobs its files name stay
    until a sweep finds them named by no file."""
    await session.exec(
        select(WorkspaceRow.session_id)
        .where(col(WorkspaceRow.session_id).in_(session_ids))
        .with_for_update()
    )  # a fork copying one of them finishes first (`copy_workspace`)
    connection = await session.connection()
    for table in (WorkspaceFileRow, WorkspaceChangeRow, WorkspaceSeenRow, WorkspaceRow):
        await connection.execute(delete(table).where(col(table.session_id).in_(session_ids)))


async def _done(
    session: AsyncSession, session_id: str, change_id: str | None
) -> dict[str, Any] | None:
    if change_id is None:
        return None
    row = await session.get(WorkspaceChangeRow, (session_id, change_id))
    return dict(row.result) if row is not None else None


def _recorded(
    session: AsyncSession, session_id: str, change_id: str | None, result: dict[str, Any]
) -> dict[str, Any]:
    if change_id is not None:
        session.add(
            WorkspaceChangeRow(session_id=session_id, change_id=change_id, result=result, at=now())
        )
    return result


def _check_expected(path: str, current: WorkspaceFileRow | None, expected: int | None) -> None:
    if expected is None:
        return
    found = current.version if current is not None else ABSENT
    if found != expected:
        state = f"at version {found}" if current is not None else "absent"
        wanted = f"version {expected}" if expected != ABSENT else "absent"
        raise VersionConflict(
            f"{path!r} is {state}, not {wanted}: another change came first; read it again"
        )


async def _locked_workspace(
    session: AsyncSession, db: Database, tenant_id: str, session_id: str
) -> WorkspaceRow:
    """The workspace's row, created on first use, locked for the transaction."""
    insert = sqlite_insert if db.is_sqlite else pg_insert
    connection = await session.connection()
    await connection.execute(
        insert(WorkspaceRow)
        .values(session_id=session_id, tenant_id=tenant_id, version=0, total_bytes=0,
                file_count=0, updated_at=now())
        .on_conflict_do_nothing(index_elements=["session_id"])
    )  # fmt: skip
    locked = await session.exec(
        select(WorkspaceRow).where(WorkspaceRow.session_id == session_id).with_for_update()
    )
    return locked.one()
