"""The client commands of `perdure`: `chat`, `sessions` and `open`, HTTP clients of a gateway.

They need neither the store nor Temporal nor Perdure's settings: only the gateway's URL and,
when it has `PERDURE_API_KEYS`, a key.
"""

import argparse
import os
import re
import sys

from perdure.commands.gateway_client import DEFAULT_URL, Gateway, GatewayError

CLIENT_COMMANDS = frozenset({"chat", "sessions", "open"})
MAX_LIST_LIMIT = 200
"""The sessions API's largest page."""
CHAT_ID = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
SUBMISSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What the gateway accepts (docs/api.md); checked here so that a bad one is named as such
rather than mistaken for a path."""


def _url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"{value!r} is not an http:// or https:// URL")
    return value


def _chat_id(value: str) -> str:
    if not CHAT_ID.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a chat id: 1-200 of the letters, digits and _ . : -"
        )
    return value


def _submission_id(value: str) -> str:
    if not SUBMISSION_ID.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a submission id: 1-64 of the letters, digits and _ -"
        )
    return value


def _limit(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= MAX_LIST_LIMIT:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_LIST_LIMIT}")
    return int(value)


def _connection_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--url",
        type=_url,
        default=os.environ.get("PERDURE_URL", DEFAULT_URL),
        help=f"the gateway (default: $PERDURE_URL, else {DEFAULT_URL})",
    )
    options.add_argument(
        "--api-key",
        default=os.environ.get("PERDURE_API_KEY"),
        metavar="KEY",
        help="the bearer key, for a gateway with PERDURE_API_KEYS (default: $PERDURE_API_KEY)",
    )
    return options


def add_client_commands(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    connection = _connection_options()
    chat = commands.add_parser(
        "chat", parents=[connection], help="chat with an agent in the terminal"
    )
    chat.add_argument(
        "--session",
        type=_chat_id,
        metavar="ID",
        help="go on with this chat (an unused id starts one of that id)",
    )
    chat.add_argument("--agent", metavar="NAME", help="the agent of a new chat")
    chat.add_argument(
        "-m",
        "--message",
        metavar="TEXT",
        help="send TEXT, print the answer and exit: 0 when the turn finishes, 1 otherwise",
    )
    chat.add_argument(
        "--steer",
        action="store_true",
        help="with -m and --session: the message joins the chat's running answer at its next "
        "step (else it is answered next); the answer it joined is shown",
    )

    sessions = commands.add_parser("sessions", help="list, show or delete chats")
    actions = sessions.add_subparsers(dest="action", required=True)
    listing = actions.add_parser(
        "list", parents=[connection], help="the chats, most recently active first"
    )
    listing.add_argument(
        "--limit", type=_limit, default=50, metavar="N", help="at most N (1-200, default 50)"
    )
    listing.add_argument(
        "--json",
        action="store_true",
        help="print the chats as JSON (without a terminal, and without --json: a "
        "tab-separated line per chat: id, title, agent, status, last active)",
    )
    show = actions.add_parser("show", parents=[connection], help="a chat's transcript")
    show.add_argument("chat_id", type=_chat_id, metavar="ID", help="the chat id")
    delete = actions.add_parser(
        "delete", parents=[connection], help="delete a chat with all of its turns"
    )
    delete.add_argument("chat_id", type=_chat_id, metavar="ID", help="the chat id")
    delete.add_argument(
        "--yes", "-y", action="store_true", help="do not ask first (it asks only at a terminal)"
    )

    opening = commands.add_parser(
        "open", parents=[connection], help="the Temporal UI link of a chat's latest turn"
    )
    opening.add_argument("chat_id", type=_chat_id, metavar="ID", help="the chat id")
    opening.add_argument(
        "--submission",
        type=_submission_id,
        metavar="SID",
        help="this turn (a submission id) instead of the latest",
    )


def run_client_command(args: argparse.Namespace) -> int:
    """The exit status: 0, or 1 with the reason on stderr."""
    # Imported here: every `perdure` command builds this parser, and the servers need no
    # terminal rendering (rich, markdown, pygments: a tenth of a second at every start).
    from rich.console import Console

    from perdure.commands.chat_client import ChatOptions, interactive, one_shot
    from perdure.commands.sessions_client import (
        confirmed_delete,
        delete_session,
        list_sessions,
        show_session,
        turn_link,
    )

    gateway = Gateway(args.url, args.api_key)
    console = Console(highlight=False)
    try:
        if args.command == "chat":
            if args.steer and (args.message is None or args.session is None):
                sys.stderr.write("perdure chat: --steer goes with -m TEXT and --session ID\n")
                return 2
            options = ChatOptions(session=args.session, agent=args.agent, steer=args.steer)
            if args.message is not None:
                return one_shot(gateway, options, args.message)
            return interactive(gateway, options)
        if args.command == "open":
            sys.stdout.write(turn_link(gateway, args.chat_id, args.submission) + "\n")
        elif args.action == "list":
            list_sessions(gateway, console, limit=args.limit, as_json=args.json)
        elif args.action == "show":
            show_session(gateway, console, args.chat_id)
        elif args.yes or not sys.stdin.isatty() or confirmed_delete(console, args.chat_id):
            delete_session(gateway, console, args.chat_id)
        else:
            console.print(f"kept chat {args.chat_id}")
        return 0
    except GatewayError as error:
        sys.stderr.write(f"perdure {args.command}: {error}\n")
        return 1
    finally:
        gateway.close()
