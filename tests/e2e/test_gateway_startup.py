"""`perdure gateway` refuses to start with a malformed PERDURE_API_KEYS, saying why in one line
and never echoing a key."""

import socket
from pathlib import Path

import pytest

from perdure.testing.process_spawner import ProcessSpawner
from perdure.testing.processes import inherited_environment

SECRET = "sk-live-1b2c3d"
REPO = Path(__file__).parents[2]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (f"{SECRET}:alpha,{SECRET}:beta", "entries 1 and 2 have the same key"),
        (f"{SECRET}:alpha,nocolon", "entry 2 of 2 must be key:tenant with exactly one ':'"),
    ],
)
def test_the_gateway_exits_at_start_on_malformed_api_keys(
    value: str, reason: str, tmp_path: Path, spawner: ProcessSpawner
) -> None:
    inherited = inherited_environment()
    env = {
        **inherited,
        "PYTHONPATH": str(REPO),
        "PERDURE_DATA_DIR": str(tmp_path),
        "PERDURE_API_KEYS": value,
        "TEMPORAL_ADDRESS": "127.0.0.1:1",  # never reached: the settings are checked first
    }

    exited = spawner.run(["gateway"], env, cwd=tmp_path)

    assert exited.returncode != 0
    assert "PERDURE_API_KEYS" in exited.stderr
    assert reason in exited.stderr
    assert "Traceback" not in exited.stderr
    assert SECRET not in exited.stderr + exited.stdout
    assert not list(tmp_path.iterdir()), "nothing was started or written"


@pytest.mark.parametrize("command", ["gateway", "serve", "dev"])
def test_a_port_in_use_stops_the_command_with_one_line_before_anything_starts(
    command: str, tmp_path: Path, spawner: ProcessSpawner
) -> None:
    inherited = inherited_environment()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        exited = spawner.run(
            [command],
            {
                **inherited,
                "PYTHONPATH": str(REPO),
                "PERDURE_DATA_DIR": str(tmp_path),
                "PERDURE_HOST": "127.0.0.1",
                "PERDURE_PORT": str(port),
                "TEMPORAL_ADDRESS": "127.0.0.1:1",  # never reached: the port is taken first
            },
            cwd=tmp_path,
        )

    assert exited.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port} (PERDURE_PORT)" in exited.stderr
    assert "Traceback" not in exited.stderr
    assert not list(tmp_path.iterdir()), "nothing was started or written"
