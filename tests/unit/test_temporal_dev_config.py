"""temporal-dev.yml configures the dev server `perdure dev` starts."""

from pathlib import Path

import pytest

from perdure.runtime.temporal_dev import DevServerConfig

REPO = Path(__file__).parents[2]


def test_the_committed_file_says_what_the_defaults_are() -> None:
    assert DevServerConfig.load(REPO / "temporal-dev.yml") == DevServerConfig()


def test_a_missing_file_means_the_defaults(tmp_path: Path) -> None:
    assert DevServerConfig.load(tmp_path / "absent.yml") == DevServerConfig()


def test_the_configuration_becomes_dev_server_flags() -> None:
    config = DevServerConfig(
        log_level="warn",
        sqlite_pragmas={"journal_mode": "wal"},
        dynamic_config={"history.timerProcessorMaxTimeShift": "100ms", "limit.x": 5},
    )

    assert config.arguments() == [
        "--log-level", "warn",
        "--sqlite-pragma", "journal_mode=wal",
        "--dynamic-config-value", 'history.timerProcessorMaxTimeShift="100ms"',
        "--dynamic-config-value", "limit.x=5",
    ]  # fmt: skip


def test_an_unknown_key_is_refused_with_the_file_named(tmp_path: Path) -> None:
    path = tmp_path / "temporal-dev.yml"
    path.write_text("log_levle: debug\n")

    with pytest.raises(RuntimeError, match="temporal-dev.yml"):
        DevServerConfig.load(path)
