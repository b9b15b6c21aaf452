"""`perdure sessions list|show|delete` and `perdure open`: the sessions API, for people."""

import json
import sys
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from perdure.commands.answer_view import message_renderable
from perdure.commands.gateway_client import Gateway, GatewayError


def _when(stamp: str) -> str:
    """An API time (ISO 8601, UTC) as local time, to the second."""
    return datetime.fromisoformat(stamp).astimezone().strftime("%Y-%m-%d %H:%M:%S")


LIST_FIELDS = ("id", "title", "agent", "status", "updated_at")


def list_sessions(gateway: Gateway, console: Console, *, limit: int, as_json: bool) -> None:
    """A table at a terminal; otherwise a tab-separated line per chat (times in ISO 8601, UTC),
    or with `as_json` the API's list as JSON: for scripts."""
    page = gateway.request("GET", "/v1/sessions", params={"limit": limit})
    sessions: list[dict[str, Any]] = page["data"]
    if as_json:
        sys.stdout.write(json.dumps(sessions, indent=2) + "\n")
        return
    if not console.is_terminal:
        for session in sessions:
            cells = (" ".join(str(session[field]).split()) for field in LIST_FIELDS)
            sys.stdout.write("\t".join(cells) + "\n")
        return
    if not sessions:
        console.print("no chats yet")
        return
    table = Table("chat", "title", "agent", "status", "last active", box=None)
    for session in sessions:
        table.add_row(
            session["id"],
            session["title"],
            session["agent"],
            session["status"],
            _when(session["updated_at"]),
        )
    console.print(table)
    if page["count"] > len(sessions):
        console.print(
            f"{len(sessions)} of {page['count']} chats, most recently active first "
            "(--limit shows more)",
            style="dim",
        )


def show_session(gateway: Gateway, console: Console, chat_id: str) -> None:
    session = gateway.request("GET", f"/v1/sessions/{chat_id}")
    messages: list[dict[str, Any]] = gateway.request("GET", f"/api/chat/{chat_id}/messages")
    console.print(Text(session["title"], style="bold"), soft_wrap=True)
    console.print(
        f"chat {session['id']} · agent {session['agent']} · {session['status']}",
        style="dim",
        soft_wrap=True,
    )
    for message in messages:
        console.print()
        console.print(message_renderable(message))


def confirmed_delete(console: Console, chat_id: str) -> bool:
    """Asked at a terminal before a delete, which cannot be undone; Ctrl-C or Ctrl-D: no."""
    try:
        answer = console.input(Text(f"delete chat {chat_id} and all of its turns? [y/N] "))
    except (KeyboardInterrupt, EOFError):
        console.print()
        return False
    return answer.strip().lower() in ("y", "yes")


def delete_session(gateway: Gateway, console: Console, chat_id: str) -> None:
    gateway.request("DELETE", f"/v1/sessions/{chat_id}")
    console.print(f"deleted chat {chat_id}")


def turn_link(gateway: Gateway, chat_id: str, submission_id: str | None) -> str:
    """The Temporal UI page of the chat's given turn, or of its latest one."""
    path = f"/v1/sessions/{chat_id}/submissions"
    if submission_id is not None:
        submission: dict[str, Any] = gateway.request("GET", f"{path}/{submission_id}")
    else:
        # The list is in queue order, oldest first: the latest turn is the last one.
        count = gateway.request("GET", path, params={"limit": 1})["count"]
        if count == 0:
            raise GatewayError(f"chat {chat_id!r} has no turns yet")
        last = gateway.request("GET", path, params={"limit": 1, "offset": count - 1})
        submission = last["data"][0]
    link = submission.get("temporalUrl")
    if not link:
        raise GatewayError(
            f"the gateway at {gateway.url} does not give Temporal UI links (no `temporalUrl` "
            "in its submissions): it is older than this client"
        )
    return str(link)
