"""Throwaway databases for the tests (perdure/testing/databases.py): a PostgreSQL that cannot
be reached skips the test, or fails it on CI."""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from perdure.testing.databases import MigratedTemplates, PostgresUnavailable, postgres_available
from perdure.testing.databases import database_url as throwaway_url

__all__ = ["database_url", "in_ci", "migrated_database_url", "postgres_available", "skip_or_fail"]


def in_ci() -> bool:
    """`CI` is set (as CI services set it: `CI=true`): every test must run, none may skip."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_or_fail(reason: str) -> None:
    """Skip with `reason`; on CI fail with it instead, so a missing service cannot pass."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


@contextlib.contextmanager
def _skipped_if_unavailable() -> Iterator[None]:
    try:
        yield
    except PostgresUnavailable as unavailable:
        skip_or_fail(str(unavailable))


@contextlib.contextmanager
def database_url(backend: str, directory: Path) -> Iterator[str]:
    with _skipped_if_unavailable(), throwaway_url(backend, directory) as url:
        yield url


@contextlib.contextmanager
def migrated_database_url(
    templates: MigratedTemplates, backend: str, directory: Path
) -> Iterator[str]:
    """As `database_url`, the store migrated already (a copy of `templates`' store)."""
    with _skipped_if_unavailable(), templates.copy(backend, directory) as url:
        yield url
