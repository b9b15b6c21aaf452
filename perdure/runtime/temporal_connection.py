"""How a process reaches Temporal beyond its address: API key, TLS and gRPC metadata, read the
way every Temporal SDK and the `temporal` CLI read them (`temporalio.envconfig`: the
`TEMPORAL_API_KEY`, `TEMPORAL_TLS*` variables and the optional TOML profile named by
`TEMPORAL_PROFILE` / `TEMPORAL_CONFIG_FILE`). Temporal Cloud needs this; a dev server does not.
The address and namespace stay Perdure's settings (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`)."""

from collections.abc import Mapping
from typing import Any

from temporalio.envconfig import ClientConfig

_BEYOND_ADDRESS = ("api_key", "tls", "rpc_metadata")


class TemporalConnectionConfigError(ValueError):
    """The environment or profile describes a connection that cannot be made."""


class TemporalUnreachable(RuntimeError):
    """No Temporal server answered at the configured address when the process started."""

    def __init__(self, address: str, error: Exception) -> None:
        super().__init__(
            f"cannot reach Temporal at {address} (TEMPORAL_ADDRESS): {error}. Start it, or "
            f"point TEMPORAL_ADDRESS at it (`perdure dev` runs one of its own)"
        )


def connection_options(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Keyword arguments for `Client.connect` besides target and namespace (never logged: they
    may hold the API key)."""
    try:
        loaded = ClientConfig.load_client_connect_config(override_env_vars=environ)
    except Exception as error:  # the Rust loader raises plain RuntimeErrors
        raise TemporalConnectionConfigError(
            f"the Temporal connection settings (TEMPORAL_API_KEY, TEMPORAL_TLS*, "
            f"TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE) are not usable: {error}"
        ) from None
    return {key: value for key, value in loaded.items() if key in _BEYOND_ADDRESS}
