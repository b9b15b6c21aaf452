"""Bring the schema up to date; safe when several processes start at once."""

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.exc import DBAPIError

from storage.urls import is_sqlite, sync_url

_MIGRATIONS = Path(__file__).parent / "migrations"
_PG_LOCK_KEY = 0x5045_5244  # "PERD"
HEADS = frozenset({"0020"})
"""The heads of the revision graph (`storage/migrations/versions`); a store at them needs no
migration. `tests/unit/test_migration_heads.py` keeps this true."""


@contextmanager
def _sqlite_file_lock(url: str) -> Iterator[None]:
    database = sync_url(url).database
    if not database or database == ":memory:":
        yield
        return
    path = Path(database)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.migrate.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _upgrade(connection: Connection, to: str) -> None:
    # Imported here: a process whose store is up to date never loads alembic and the revision
    # scripts (a quarter of a second at every start).
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    config.attributes["connection"] = connection
    command.upgrade(config, to)


def _write_ahead_log(engine: Engine) -> None:
    """Put the file in WAL mode once, here, under the migration lock. Every connection asks
    for WAL too (storage/db.py), but the first switch of a file takes an exclusive lock, and
    two connections switching at once deadlock: SQLite fails one at once with "database is
    locked", whatever its busy timeout. Asking a file already in WAL mode is harmless."""
    with engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA journal_mode=WAL")
        connection.commit()


def _at_heads(engine: Engine) -> bool:
    """The store's recorded revisions are `HEADS` (a store not yet migrated has none)."""
    with engine.connect() as connection:
        try:
            found = connection.execute(text("SELECT version_num FROM alembic_version"))
            return set(found.scalars()) == HEADS
        except DBAPIError:  # no such table
            return False


def migrate(url: str, *, to: str = "heads") -> None:
    """`to`: "heads" (features may add migrations on parallel branches of the revision graph),
    or a revision, for a test that starts from an older schema."""
    engine = create_engine(sync_url(url))
    try:
        if to == "heads" and _at_heads(engine):
            return
        if is_sqlite(url):
            with _sqlite_file_lock(url):
                _write_ahead_log(engine)
                with engine.begin() as connection:
                    _upgrade(connection, to)
        else:
            with engine.connect() as connection:
                connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_LOCK_KEY})
                connection.commit()
                try:
                    with connection.begin():
                        _upgrade(connection, to)
                finally:
                    connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_LOCK_KEY})
                    connection.commit()
    finally:
        engine.dispose()
