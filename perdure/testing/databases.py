"""Throwaway databases: a SQLite file, or a fresh PostgreSQL database on localhost."""

import contextlib
import os
import shutil
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
    _require_postgres()
    with _throwaway_database() as url:
        yield url


def _require_postgres() -> None:
    if (reason := postgres_available()) is not None:
        raise PostgresUnavailable(reason)


def _url_of(name: str) -> str:
    return f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}"


def _create_database(name: str, template: str | None = None) -> None:
    copied = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"{copied}')


def _drop_database(name: str) -> None:
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def _throwaway_database(template: str | None = None) -> Iterator[str]:
    """A new PostgreSQL database (a copy of `template`, if given), dropped afterwards."""
    name = f"perdure_test_{uuid.uuid4().hex[:12]}"
    _create_database(name, template)
    try:
        yield _url_of(name)
    finally:
        _drop_database(name)


class MigratedTemplates:
    """A migrated store per backend, made at first use, copied for each test that wants one:
    migrating a store costs about half a second of CPU, copying it a few milliseconds. `close`
    drops what was made."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._made: dict[str, str] = {}

    def _template(self, backend: str) -> str:
        """The template's file (SQLite) or database name (PostgreSQL), migrated."""
        if backend not in self._made:
            from storage.migrate import migrate

            if backend == "sqlite":
                path = self._directory / "template.db"
                migrate(f"sqlite:///{path}")  # its last connection closed: no write-ahead log left
                self._made[backend] = str(path)
            else:
                name = f"perdure_template_{uuid.uuid4().hex[:12]}"
                _create_database(name)
                self._made[backend] = name
                migrate(_url_of(name))
        return self._made[backend]

    @contextlib.contextmanager
    def copy(self, backend: str, directory: Path) -> Iterator[str]:
        """As `database_url`, but the store is migrated already."""
        if backend == "sqlite":
            template = self._template(backend)
            path = directory / "perdure.db"
            shutil.copyfile(template, path)
            yield f"sqlite:///{path}"
            return
        _require_postgres()
        with _throwaway_database(template=self._template(backend)) as url:
            yield url

    def close(self) -> None:
        name = self._made.pop("postgres", None)
        if name is not None:
            _drop_database(name)
