"""With `CI` set, every test must run: a missing PostgreSQL, node or npm fails the run (the
test, and the Makefile's node install step) instead of skipping. Without `CI`, they skip with
the reason, as on a developer's machine."""

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

import perdure.testing.databases
from perdure.testing.stack import free_port
from tests.databases import database_url, skip_or_fail
from tests.e2e import test_ai_sdk_client

REPO = Path(__file__).parents[2]
UNREACHABLE = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"


def outcome(call: Callable[[], object]) -> BaseException | None:
    """What `call` raised (a skip and a failure are exceptions too), or None."""
    try:
        call()
    except BaseException as raised:  # noqa: BLE001 - the outcome is what is examined
        return raised
    return None


def open_postgres(directory: Path) -> None:
    with database_url("postgres", directory):
        pass


@pytest.fixture
def no_postgres(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(perdure.testing.databases, "POSTGRES_ADMIN_URL", UNREACHABLE)


def test_on_ci_a_missing_postgresql_fails_instead_of_skipping(
    no_postgres: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CI", "true")

    raised = outcome(lambda: open_postgres(tmp_path))

    assert isinstance(raised, pytest.fail.Exception), repr(raised)
    assert "PostgreSQL is not reachable" in str(raised) and "CI is set" in str(raised)


def test_off_ci_a_missing_postgresql_skips_with_the_reason(
    no_postgres: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CI", raising=False)

    raised = outcome(lambda: open_postgres(tmp_path))

    assert isinstance(raised, pytest.skip.Exception), repr(raised)
    assert "PostgreSQL is not reachable" in str(raised)


async def test_on_ci_a_missing_ai_sdk_client_fails_instead_of_skipping(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(test_ai_sdk_client, "NODE_TESTS", tmp_path)  # no node_modules here

    try:
        await test_ai_sdk_client.test_the_ai_sdk_chat_client_sends_resumes_stops_and_answers_parked_turns(
            stack=None  # type: ignore[arg-type] - refused before the stack is used
        )
    except BaseException as raised:  # noqa: BLE001 - the outcome is what is examined
        assert isinstance(raised, pytest.fail.Exception), repr(raised)
        assert "the ai package is not installed" in str(raised)
    else:
        raise AssertionError("the test ran without node_modules")


def make_node_install(ci: str | None, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The Makefile's node install step, on a PATH without npm or node."""
    make = shutil.which("make")
    if make is None:
        skip_or_fail("make is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tr").symlink_to(shutil.which("tr") or "/usr/bin/tr")
    env = {"PATH": str(bin_dir), **({"CI": ci} if ci is not None else {})}
    return subprocess.run(
        [make, "--always-make", "--no-print-directory", "tests/node/node_modules/.installed"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_on_ci_the_makefile_fails_when_npm_is_missing(tmp_path: Path) -> None:
    installed = make_node_install("true", tmp_path)

    assert installed.returncode != 0
    assert "CI is set" in installed.stderr


def test_off_ci_the_makefile_skips_the_node_install_when_npm_is_missing(tmp_path: Path) -> None:
    installed = make_node_install(None, tmp_path)

    assert installed.returncode == 0, installed.stderr
    assert "will be skipped" in installed.stdout
