"""`perdure chat`: talk to an agent through the gateway, at a prompt or once from a script."""

import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from rich.console import Console
from rich.text import Text

import perdure.commands.line_editing as line_editing
from perdure.commands.answer_view import LiveView, PlainView, message_renderable, one_line
from perdure.commands.chat_turn import Approval, ApprovalAnswer, Asker, TurnEnd, TurnFollower
from perdure.commands.gateway_client import Gateway, GatewayError
from perdure.commands.input_prompts import ask_inputs_at

JOINED = "joined the running turn of submission "
"""How a steering message's own stream ends when it joined the running answer (docs/api.md)."""
HISTORY_MESSAGES = 6
"""The last messages shown when a chat is taken up again."""
ACTIVE_STATUSES = ("streaming", "waiting")
"""`metadata.status` of an answer still under way: it is followed live, not shown as history."""


@dataclass(frozen=True)
class ChatOptions:
    session: str | None
    agent: str | None
    steer: bool = False
    """`-m` joins the chat's running answer (`"concurrency": "steer"`)."""


@dataclass(frozen=True)
class Chat:
    chat_id: str
    agent: str | None
    """Sent with the first message of a new chat only: it picks the agent of a new chat."""
    session: dict[str, Any] | None
    """The session as the API shows it; None for a new chat."""


def open_chat(gateway: Gateway, options: ChatOptions) -> Chat:
    if options.session is None:
        return Chat(f"chat-{uuid.uuid4().hex[:12]}", options.agent, None)
    session = gateway.session(options.session)
    if session is None:
        return Chat(options.session, options.agent, None)
    if options.agent is not None and options.agent != session["agent"]:
        raise GatewayError(
            f"chat {options.session!r} talks to agent {session['agent']!r}; "
            "--agent picks the agent of a new chat only"
        )
    return Chat(options.session, None, session)


def ask_at(console: Console) -> Asker:
    """Ask at the terminal; Ctrl-C or Ctrl-D there stops the turn."""

    def ask(approval: Approval) -> ApprovalAnswer:
        console.print(
            Text.assemble(
                ("? ", "bold yellow"),
                (approval.tool_name, "bold"),
                f" {one_line(approval.arguments)} needs your approval",
            )
        )
        try:
            while True:
                answer = console.input(Text("  allow it? [y/n] ")).strip().lower()
                line_editing.forget_last_line()
                if answer in ("y", "yes"):
                    return ApprovalAnswer(approved=True)
                if answer in ("n", "no"):
                    reason = console.input(Text("  reason (optional): ")).strip()
                    line_editing.forget_last_line()
                    return ApprovalAnswer(approved=False, reason=reason or None)
        except (KeyboardInterrupt, EOFError):
            console.print()  # the answer goes on below the question, not after it
            raise KeyboardInterrupt from None

    return ask


def _show_history(console: Console, gateway: Gateway, chat: Chat) -> bool:
    """The chat's last messages; True when its latest answer is still under way."""
    messages: list[dict[str, Any]] = gateway.request("GET", f"/api/chat/{chat.chat_id}/messages")
    active = (
        bool(messages) and (messages[-1].get("metadata") or {}).get("status") in ACTIVE_STATUSES
    )
    shown = messages[:-1] if active else messages
    if len(shown) > HISTORY_MESSAGES:
        console.print(f"… {len(shown) - HISTORY_MESSAGES} earlier messages", style="dim")
    for message in shown[-HISTORY_MESSAGES:]:
        console.print(message_renderable(message))
        console.print()
    return active


def interactive(gateway: Gateway, options: ChatOptions) -> int:
    console = Console(highlight=False)
    chat = open_chat(gateway, options)
    line_editing.enable(line_editing.history_file(os.environ))

    def follower() -> TurnFollower:
        return TurnFollower(
            gateway,
            chat.chat_id,
            LiveView(console),
            ask=ask_at(console),
            ask_input=ask_inputs_at(console),
        )

    if chat.session is None:
        console.print(f"new chat {chat.chat_id}", style="bold")
    else:
        console.print(f"chat {chat.chat_id}: {chat.session['title']}", style="bold")
        if _show_history(console, gateway, chat):
            joining = follower()
            if not _take_turn(console, joining, joining.join):
                return 0
    console.print("Ctrl-C stops an answer; Ctrl-C or Ctrl-D at the prompt leaves.", style="dim")
    agent = chat.agent
    while True:
        try:
            text = console.input(Text("› ", style="bold green"))
        except (KeyboardInterrupt, EOFError):
            console.print()
            return 0
        if not text.strip():
            continue
        line_editing.remember_last_line()
        sending = follower()
        if not _take_turn(console, sending, partial(sending.send, text, agent=agent)):
            return 0
        agent = None


def _take_turn(console: Console, follower: TurnFollower, turn: Callable[[], TurnEnd]) -> bool:
    """One turn at the prompt; False when the user leaves (a second Ctrl-C)."""
    try:
        end = turn()
    except KeyboardInterrupt:
        console.print()
        return False
    except GatewayError as error:
        console.print(Text(f"✗ {error}", style="bold red"))
        return True
    if end.how == "abort" and (follower.last_chunk or {}).get("type") != "abort":
        console.print(Text("■ stopped", style="yellow"))  # stopped before anything arrived
    console.print()
    return True


def joined_submission(end: TurnEnd) -> str | None:
    """The running turn a steering message joined, from its own stream's abort reason."""
    detail = end.detail or ""
    if end.how != "abort" or not detail.startswith(JOINED):
        return None
    return detail.removeprefix(JOINED) or None


def one_shot(gateway: Gateway, options: ChatOptions, text: str) -> int:
    """Send one message and print its answer: Markdown at a terminal, its text otherwise.
    0 when the turn finishes; 1, with the reason on stderr, when it does not; 130 when a
    second Ctrl-C leaves while the turn stops."""
    console = Console(highlight=False)
    chat = open_chat(gateway, options)
    if chat.session is not None and chat.session["status"] == "waiting":
        # A message would queue behind the parked turn, and wait as long as it does.
        raise GatewayError(
            f"chat {chat.chat_id!r} waits for an approval: answer it first, with "
            f"`perdure chat --session {chat.chat_id}`"
        )
    if chat.session is None:
        sys.stderr.write(f"new chat {chat.chat_id}\n")
    plain = None if console.is_terminal else PlainView(sys.stdout)
    follower = TurnFollower(
        gateway,
        chat.chat_id,
        plain or LiveView(console),
        ask=ask_at(console) if console.is_terminal and sys.stdin.isatty() else None,
    )
    try:
        end = follower.send(text, agent=chat.agent, concurrency="steer" if options.steer else None)
        joined = joined_submission(end)
        if joined is not None:
            # Its own stream ends there; the answer it joined goes on, and answers it.
            end = follower.follow(joined)
    except KeyboardInterrupt:
        return 130
    finally:
        if plain is not None:
            plain.close()
    if end.how == "finish":
        return 0
    reason = {
        "error": f"the turn ended in an error: {end.detail}",
        "abort": f"the turn was stopped ({end.detail})",
        "parked": str(end.detail),
    }[end.how]
    sys.stderr.write(f"perdure chat: {reason}\n")
    return 1
