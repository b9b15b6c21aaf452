"""Throwaway databases: a SQLite file, or a fresh PostgreSQL database on localhost."""

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg

POSTGRES_ADMIN_URL = os.environ.get(
    "PERDURE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


class PostgresUnavailable(Exception):
    """PostgreSQL cannot be reached; the message says why."""


def postgres_available() -> str | None:
    """None when reachable; otherwise why not."""
    try:
        with psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=3):
            return None
    except psycopg.Error as error:
        return (
            f"PostgreSQL is not reachable at {POSTGRES_ADMIN_URL}: {' '.join(str(error).split())}"
        )


@contextlib.contextmanager
def database_url(backend: str, directory: Path) -> Iterator[str]:
    """A store URL for `backend` (`sqlite` or `postgres`), dropped afterwards;
    `PostgresUnavailable` when PostgreSQL cannot be reached."""
    if backend == "sqlite":
        yield f"sqlite:///{directory / 'perdure.db'}"
        return
    reason = postgres_available()
    if reason is not None:
        raise PostgresUnavailable(reason)
    name = f"perdure_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
