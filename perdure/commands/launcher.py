"""The `perdure` executable: the client commands start without loading the server.

`commands.cli` imports the gateway, Temporal's SDK and the store (seconds on a busy machine);
`chat`, `sessions` and `open` need only httpx and rich, so they are parsed and run here
before any of that is imported; `keys` and `tenants` need only the store. Everything else,
`--help` included, is `commands.cli.main`.
"""

import argparse
import sys

from perdure.commands.client_cli import CLIENT_COMMANDS, add_client_commands, run_client_command


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in CLIENT_COMMANDS:
        parser = argparse.ArgumentParser(prog="perdure")
        add_client_commands(parser.add_subparsers(dest="command", required=True))
        raise SystemExit(run_client_command(parser.parse_args()))
    if len(sys.argv) > 1 and sys.argv[1] in ("keys", "tenants"):  # the store only
        from perdure.commands.access_cli import main as run_access

        run_access()
    from perdure.commands.cli import main as run_perdure

    run_perdure()
