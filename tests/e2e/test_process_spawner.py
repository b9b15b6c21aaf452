"""The spawner the chaos specs start their `perdure` processes with
(`perdure/testing/process_spawner.py`): each is a process of its own, with exactly the
environment, arguments and directory it was given, reaped and reported as an executable's."""

import os
import signal
import sqlite3
from pathlib import Path

import pytest

from perdure.testing.process_spawner import ProcessSpawner
from perdure.testing.processes import inherited_environment
from perdure.testing.stack import free_port


def environment(**variables: str) -> dict[str, str]:
    return {**inherited_environment(), **variables}


def test_a_spawned_command_runs_with_its_own_environment_and_exits_as_it_says(
    spawner: ProcessSpawner, tmp_path: Path
) -> None:
    store = tmp_path / "store.db"
    migrate = spawner.start(
        "migrate",
        environment(PERDURE_DATABASE_URL=f"sqlite+aiosqlite:///{store}"),
        tmp_path / "migrate.log",
    )

    assert migrate.wait(60) == 0, (tmp_path / "migrate.log").read_text()
    assert migrate.pid != os.getpid()
    with sqlite3.connect(store) as tables:
        (version,) = tables.execute("SELECT version_num FROM alembic_version").fetchone()
    assert version


def test_a_command_s_usage_error_is_its_exit_code_and_its_output_is_in_its_log(
    spawner: ProcessSpawner, tmp_path: Path
) -> None:
    log = tmp_path / "unknown.log"

    code = spawner.start("no-such-command", environment(), log).wait(30)

    assert code == 2
    assert "invalid choice: 'no-such-command'" in log.read_text()


def test_a_killed_process_reports_the_signal_as_a_popen_does(
    spawner: ProcessSpawner, tmp_path: Path
) -> None:
    unreachable = f"127.0.0.1:{free_port()}"
    worker = spawner.start(
        "worker",
        environment(
            TEMPORAL_ADDRESS=unreachable,
            PERDURE_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'store.db'}",
        ),
        tmp_path / "worker.log",
    )
    assert worker.poll() is None

    os.killpg(worker.pid, signal.SIGKILL)  # in a session of its own, as the specs kill it

    assert worker.wait(30) == -signal.SIGKILL


def test_interpreter_options_the_spawner_does_not_share_are_refused(
    spawner: ProcessSpawner, tmp_path: Path
) -> None:
    changed = environment(PYTHONHASHSEED="12345" if os.environ.get("PYTHONHASHSEED") else "7")

    with pytest.raises(ValueError, match="interpreter options"):
        spawner.start("migrate", changed, tmp_path / "refused.log")


def test_a_run_reports_its_exit_code_and_its_standard_output_and_error_apart(
    spawner: ProcessSpawner, tmp_path: Path
) -> None:
    helped = spawner.run(["--help"], environment(), cwd=tmp_path)
    refused = spawner.run(
        ["gateway"], environment(PERDURE_API_KEYS="nocolon"), cwd=tmp_path, timeout=60
    )

    assert (helped.returncode, helped.stderr) == (0, "")
    assert helped.stdout.startswith("usage: perdure")
    assert refused.returncode == 1 and refused.stdout == ""
    assert "PERDURE_API_KEYS" in refused.stderr
    assert not list(tmp_path.iterdir()), "the run's output is kept outside its directory"
