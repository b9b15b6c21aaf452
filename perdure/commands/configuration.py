"""What every server-side command does first: logging as configured, then the settings."""

import logging

from pydantic import ValidationError

from perdure.runtime.settings import Settings
from perdure.telemetry.json_logs import use_json_logs


def configured() -> Settings:
    """The settings, with logging set up as they ask; an invalid configuration ends the process
    with one line naming each problem (never a value: it may be a key)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # A start prints the lines that matter; each migration step is shown by `perdure migrate`.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # The HTTP clients under the provider SDKs log every request at INFO: a line a model step,
    # and a measurable share of a busy worker's CPU. Their warnings and errors still show.
    for client in ("httpx", "httpx2"):
        logging.getLogger(client).setLevel(logging.WARNING)
    try:
        settings = Settings()
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in problem['loc'])}: "
            f"{problem['msg'].removeprefix('Value error, ')}"
            for problem in error.errors(include_url=False, include_input=False)
            # A default computed from other fields is not computed once one of them is invalid:
            # that one is the problem named.
            if problem["type"] != "default_factory_not_called"
        )
        raise SystemExit(f"perdure: invalid configuration: {problems}") from None
    if settings.log_format == "json":
        use_json_logs(secrets=settings.log_secrets())
    return settings
