"""Follow one chat turn through the gateway: its stream, resumes, approvals and a stop.

Every event's id (`<submission id>:<seq>`) is kept; when the connection drops, the stream is
resumed after the last one (`GET /api/chat/{id}/stream` with `Last-Event-ID`), so nothing is
shown twice and nothing is missed. A turn that parks for approvals is answered through the
approvals API and followed on after the park's `finish`. Ctrl-C stops the turn
(`POST /api/chat/{id}/stop`) and the stream is read on to its `abort`; a second Ctrl-C is
left to the caller.
"""

import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal

from perdure.commands.answer_view import AnswerView
from perdure.commands.gateway_client import AnswerStream, Gateway, GatewayError, Unreachable
from perdure.commands.input_prompts import InputAsker, PendingInputs

RESUME_DELAYS = (0.2, 0.5, 1.0, 2.0, 3.0, 5.0, 5.0, 5.0)
"""Seconds before each resume attempt in a row that gets nothing; then the client gives up
(the turn itself goes on: `perdure chat --session` follows it later)."""
TERMINAL_CHUNKS = frozenset({"finish", "abort", "error"})
CLIENT_TOOL_REFUSAL = "This terminal client cannot run client-side tools."

Opener = Callable[[], AbstractContextManager[AnswerStream | None]]


@dataclass(frozen=True)
class Approval:
    approval_id: str
    tool_call_id: str
    tool_name: str
    arguments: Any


@dataclass(frozen=True)
class ApprovalAnswer:
    approved: bool
    reason: str | None = None


Asker = Callable[[Approval], ApprovalAnswer]
"""Asks the user about one approval (may raise KeyboardInterrupt: the turn is stopped)."""


@dataclass(frozen=True)
class TurnEnd:
    how: Literal["finish", "abort", "error", "parked"]
    """`parked`: it waits for approvals nobody here can give (no terminal to ask at)."""
    detail: str | None = None
    """The error's text, the abort's reason, or what a parked turn waits for."""


def user_message(text: str) -> dict[str, Any]:
    return {
        "id": f"msg-{uuid.uuid4().hex[:16]}",
        "role": "user",
        "parts": [{"type": "text", "text": text}],
    }


@dataclass
class TurnFollower:
    gateway: Gateway
    chat_id: str
    view: AnswerView
    ask: Asker | None
    """None when nobody can be asked: a turn that parks for approvals ends `parked`."""
    submission_id: str | None = None
    last_event_id: str | None = None
    last_chunk: dict[str, Any] | None = None
    stopping: bool = False
    approvals: dict[str, Approval] = field(default_factory=dict)
    """Requested and not yet answered, by approval id, in the order asked."""
    _calls: dict[str, tuple[str, Any]] = field(default_factory=dict)
    ask_input: InputAsker | None = None
    """Asks an MCP server's questions (input_prompts.py); None: such a turn ends `parked`."""
    inputs: PendingInputs = field(default_factory=PendingInputs)

    def send(
        self, text: str, *, agent: str | None = None, concurrency: str | None = None
    ) -> TurnEnd:
        body: dict[str, Any] = {
            "id": self.chat_id,
            "trigger": "submit-message",
            "messages": [user_message(text)],
        }
        if agent is not None:
            body["agent"] = agent
        if concurrency is not None:
            body["concurrency"] = concurrency

        def post() -> AbstractContextManager[AnswerStream | None]:
            return self.gateway.stream("POST", "/api/chat", body=body)

        return self._drive(post)

    def follow(self, submission_id: str) -> TurnEnd:
        """Follow one submission's answer from its start (a turn a steering message joined)."""
        self.submission_id, self.last_event_id, self.last_chunk = submission_id, None, None
        return self._drive(self._submission_stream)

    def join(self) -> TurnEnd:
        """Follow the session's active answer from its start (a turn that runs or waits)."""
        return self._drive(lambda: self.gateway.stream("GET", f"/api/chat/{self.chat_id}/stream"))

    def _drive(self, opener: Opener) -> TurnEnd:
        self._segment(opener)
        while self._parked() and not self.stopping:
            try:
                if self.approvals:
                    if self.ask is None:
                        return self._parked_end()
                    self._answer_approvals(self.ask)
                if self.inputs.waiting:
                    if self.ask_input is None:
                        return TurnEnd(
                            "parked", f"the turn waits for answers to {self.inputs.describe()}"
                        )
                    self.inputs.answer(self.gateway, self.chat_id, self.ask_input)
                self._refuse_client_calls()
            except KeyboardInterrupt:
                self._request_stop()
            self._segment(self._resume)
        return self._end()

    def _segment(self, opener: Opener) -> None:
        """Read until the server ends the stream. A first Ctrl-C stops the turn and reads on
        to its end; a second one propagates."""
        with self.view.segment():
            while True:
                try:
                    self._read(opener)
                    return
                except KeyboardInterrupt:
                    if self.stopping:
                        raise
                    self._request_stop()
                    if self.submission_id is None:
                        return  # nothing of the turn was seen: nothing to read on
                    opener = self._resume

    def _read(self, opener: Opener) -> None:
        """Read until the server ends the stream (or has nothing to send), resuming after the
        last event seen when the connection drops. Before anything of the turn was seen, a
        failure is the caller's at once: the gateway is not there, or refused the request."""
        delays = iter(RESUME_DELAYS)
        while True:
            progressed = False
            try:
                with opener() as stream:
                    if stream is None:
                        return
                    if self._another_turns(stream):
                        opener = self._submission_stream
                        continue
                    self.submission_id = self.submission_id or stream.submission_id
                    for event in stream.events():
                        progressed = True
                        self._apply(event.event_id, event.chunk)
                    if stream.done:
                        return
                    lost = "the gateway closed the stream"
            except Unreachable as error:
                if self.submission_id is None:
                    raise
                lost = str(error)
            if progressed:
                delays = iter(RESUME_DELAYS)
            elif (delay := next(delays, None)) is not None:
                time.sleep(delay)
            else:
                follow = f"`perdure chat --session {self.chat_id}`"
                raise Unreachable(f"{lost}; the turn goes on, and {follow} follows it")
            opener = self._resume

    def _another_turns(self, stream: AnswerStream) -> bool:
        """A resume answered with a newer turn's stream (the chat's active answer is another
        client's now): this turn's own stream is read instead."""
        return self.submission_id is not None and stream.submission_id not in (
            None,
            self.submission_id,
        )

    def _apply(self, event_id: str | None, chunk: dict[str, Any]) -> None:
        if event_id is not None:
            self.last_event_id = event_id
        self.last_chunk = chunk
        self.inputs.seen(chunk)
        kind = chunk.get("type")
        call_id = str(chunk.get("toolCallId"))
        if kind == "tool-input-available":
            self._calls[call_id] = (str(chunk.get("toolName", "tool")), chunk.get("input"))
        elif kind == "tool-approval-request":
            name, arguments = self._calls.get(call_id, ("tool", None))
            approval_id = str(chunk.get("approvalId"))
            self.approvals[approval_id] = Approval(approval_id, call_id, name, arguments)
        elif kind in ("tool-output-available", "tool-output-error", "tool-output-denied"):
            self.approvals = {
                key: approval
                for key, approval in self.approvals.items()
                if approval.tool_call_id != call_id
            }
        self.view.apply(chunk)

    def _resume(self) -> AbstractContextManager[AnswerStream | None]:
        return self.gateway.stream(
            "GET",
            f"/api/chat/{self.chat_id}/stream",
            last_event_id=self.last_event_id or f"{self.submission_id}:-1",
        )

    def _submission_stream(self) -> AbstractContextManager[AnswerStream | None]:
        return self.gateway.stream(
            "GET",
            f"/v1/sessions/{self.chat_id}/submissions/{self.submission_id}/stream",
            last_event_id=self.last_event_id or f"{self.submission_id}:-1",
        )

    def _request_stop(self) -> None:
        self.stopping = True
        try:
            # The turn this chat watches, when known: a stop never reaches a later one.
            params = {"submissionId": self.submission_id} if self.submission_id else None
            self.gateway.request("POST", f"/api/chat/{self.chat_id}/stop", params=params)
        except GatewayError as error:
            # A new chat whose first message never reached the gateway: nothing runs.
            if error.code != "session_not_found":
                raise
        self.view.stopping()

    def _parked(self) -> bool:
        chunk = self.last_chunk or {}
        return chunk.get("type") == "finish" and chunk.get("finishReason") == "tool-calls"

    def _answer_approvals(self, ask: Asker) -> None:
        for approval in list(self.approvals.values()):
            answer = ask(approval)
            body: dict[str, Any] = {"approved": answer.approved}
            if answer.reason:
                body["reason"] = answer.reason
            try:
                self.gateway.request(
                    "POST",
                    f"/v1/sessions/{self.chat_id}/approvals/{approval.approval_id}",
                    json=body,
                )
            except GatewayError as error:
                # Answered elsewhere, expired, or its turn ended: the stream says how it went.
                if error.code != "wait_conflict":
                    raise

    def _refuse_client_calls(self) -> None:
        for call in self.gateway.request("GET", f"/v1/sessions/{self.chat_id}/tool-calls"):
            self.gateway.request(
                "POST",
                f"/v1/sessions/{self.chat_id}/tool-calls/{call['toolCallId']}",
                json={"errorText": CLIENT_TOOL_REFUSAL},
            )

    def _parked_end(self) -> TurnEnd:
        waiting = ", ".join(
            f"{approval.tool_name} ({approval.approval_id})" for approval in self.approvals.values()
        )
        return TurnEnd(
            "parked",
            f"the turn waits for approval of {waiting}: "
            f"answer with `perdure chat --session {self.chat_id}`",
        )

    def _end(self) -> TurnEnd:
        chunk = self.last_chunk or {}
        kind = chunk.get("type")
        if kind == "error":
            return TurnEnd("error", str(chunk.get("errorText", "the turn failed")))
        if kind == "abort" or (self.stopping and kind not in TERMINAL_CHUNKS):
            return TurnEnd("abort", str(chunk.get("reason") or "user-cancelled"))
        return TurnEnd("finish")
