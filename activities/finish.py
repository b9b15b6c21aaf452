"""The finish activity: close the log, store the answer, release the session, admit the next."""

import asyncio
import logging
from functools import partial
from typing import Protocol

from temporalio import activity

from activities._support import current_writer, run_hook
from activities.events import emit
from perdure.agent import Agent, TurnContext
from perdure.agents_registry import AgentRegistry
from perdure.domain.mcp_tasks import open_tasks
from perdure.domain.names import FINISH_TURN_ACTIVITY
from perdure.domain.payloads import FinishTurnInput, FinishTurnResult
from perdure.domain.policy import RecoveryPolicy
from perdure.domain.reducer import Reduction, reduce_chunks
from perdure.domain.repair import settled_parts_only
from perdure.domain.storage_hygiene import for_storage
from perdure.domain.turn_chunks import closing_chunks
from perdure.domain.ui import Chunk
from perdure.domain.usage import BUDGET, Usage
from perdure.mcp_servers import McpServer
from perdure.recovery import ExhaustedContext
from perdure.telemetry import metrics
from perdure.turn_control.lifecycle import SubmissionLifecycle
from storage.bus import ChunkBus
from storage.chunks import LogWriter, read_chunks
from storage.db import Database
from storage.hygiene import trim_messages
from storage.incidents import load_incident
from storage.stops import Ending, decide_ending
from storage.tables import SubmissionRow
from storage.turn_end import Finished, TurnEnd

log = logging.getLogger(__name__)

TASK_CANCELS_SECONDS = 5.0
"""How long a finish spends cancelling the MCP tasks its turn left running."""


class TaskCanceller(Protocol):
    """Sends `tasks/cancel` to an MCP server (activities/mcp_toolbox.py)."""

    async def cancel_task(self, server: McpServer, task_id: str) -> None: ...


class TurnFinisher:
    """Ends a turn however it ended; shared by the finish activity and the reconciler.
    Idempotent: run again after a crash it changes nothing and repeats the admit signal."""

    def __init__(
        self,
        *,
        db: Database,
        bus: ChunkBus,
        agents: AgentRegistry,
        lifecycle: SubmissionLifecycle,
        tasks: TaskCanceller | None = None,
    ) -> None:
        self._db = db
        self._bus = bus
        self._agents = agents
        self._lifecycle = lifecycle
        self._tasks = tasks

    async def finish(self, turn: FinishTurnInput, *, writer: LogWriter) -> FinishTurnResult:
        turn, recorded = await self._decided(turn)
        name = turn.turn.agent
        agent = self._agents.resolve(name) if name in self._agents.names() else None
        terminal_message = self._terminal_message(agent, turn)
        if turn.outcome == "skipped" and recorded is not None and recorded.error:
            turn = turn.model_copy(update={"error_text": recorded.error})
        read = await read_chunks(self._db, message_id=turn.turn.assistant_message_id)
        if turn.exhausted:
            await self._exhausted(agent, turn, read, terminal_message)
        outcome = "error" if turn.exhausted else turn.outcome
        await self._lifecycle.finish(
            TurnEnd(
                submission_id=turn.turn.submission_id,
                session_id=turn.turn.session_id,
                outcome=outcome,
                read=read,
                plan=partial(self._closing_plan, turn, terminal_message),
                error=turn.error_text,
                writer=writer,
            ),
            before_next=partial(self._ended, turn, agent, recorded, read),
        )
        return FinishTurnResult(outcome=outcome)

    @staticmethod
    def _terminal_message(agent: Agent | None, turn: FinishTurnInput) -> str:
        """What an exhausted turn's answer ends with, or one that used its budget."""
        if turn.finish_reason == BUDGET and not turn.exhausted:
            return agent.budget_message if agent else Agent.budget_message
        return (agent.recovery if agent else RecoveryPolicy()).terminal_message

    def _closing_plan(
        self,
        turn: FinishTurnInput,
        terminal_message: str,
        logged: list[Chunk],
        usage: Usage | None,
    ) -> tuple[list[Chunk], Reduction]:
        """Run on the whole log, inside the store's transaction that ends the turn."""
        closing = closing_chunks(logged, turn, terminal_message, usage)
        stored = reduce_chunks(logged + closing)
        if not turn.persist_partial:
            stored.parts = settled_parts_only(stored.parts)
        self._clean(stored, turn.turn.assistant_message_id)
        return closing, stored

    async def _ended(
        self,
        turn: FinishTurnInput,
        agent: Agent | None,
        recorded: SubmissionRow | None,
        read: list[tuple[int, Chunk]],
        finished: Finished,
    ) -> None:
        """What the turn's end does before the next turn is told to run: announce the closed
        log, count it, trim the session, cancel the MCP tasks its calls left running, run
        `on_turn_end`."""
        self._bus.publish(turn.turn.assistant_message_id)
        if finished.closed:  # this call ended the turn (a repeated finish changes nothing)
            ended = "exhausted" if turn.exhausted else turn.outcome
            metrics.turn_ended(ended)
            log.info("turn ended: %s", ended)
        if agent is not None and agent.max_persisted_messages is not None:
            await trim_messages(
                self._db, session_id=turn.turn.session_id, keep=agent.max_persisted_messages
            )
        if finished.closed and agent is not None:
            await self._cancel_tasks(agent, read)
            context = TurnContext(
                tenant_id=recorded.tenant_id if recorded else "",
                session_id=turn.turn.session_id,
                submission_id=turn.turn.submission_id,
                assistant_message_id=turn.turn.assistant_message_id,
                agent=agent.name,
            )
            await run_hook(
                "on_turn_end",
                lambda: agent.on_turn_end(context, turn.outcome),
                limit=agent.hook_timeout.total_seconds(),
            )

    async def _cancel_tasks(self, agent: Agent, read: list[tuple[int, Chunk]]) -> None:
        """A call's task the log last saw running, when its turn ends: a stop that reached no
        live follower (its worker had died) is carried to the server here."""
        if self._tasks is None or not agent.mcp_servers:
            return
        servers = {server.name: server for server in agent.mcp_servers}
        running = open_tasks(reduce_chunks([chunk for _, chunk in read]).parts)
        try:
            # Bounded as a whole: the finish releases the session, and must not wait on a
            # server that is down (its tasks are left to their TTL).
            async with asyncio.timeout(TASK_CANCELS_SECONDS):
                for name, task_id in running:
                    if name in servers:
                        await self._tasks.cancel_task(servers[name], task_id)
        except TimeoutError:
            log.warning("MCP tasks left running after %g s of cancels", TASK_CANCELS_SECONDS)

    async def _decided(self, turn: FinishTurnInput) -> tuple[FinishTurnInput, SubmissionRow | None]:
        """The turn as the store decides it ends (a recorded stop wins over what the workflow
        saw: its cancellation may have arrived after the step it stopped had completed), and
        the submission as the decision read it."""
        proposed: Ending = "exhausted" if turn.exhausted else turn.outcome
        decided = await decide_ending(
            self._db, submission_id=turn.turn.submission_id, proposed=proposed
        )
        if decided.ending == "exhausted":
            update: dict[str, object] = {"outcome": "error", "exhausted": True}
        else:
            update = {"outcome": decided.ending, "exhausted": False}
        if decided.ending != proposed:
            log.info(
                "the turn ends %s, not %s: a stop was recorded first", decided.ending, proposed
            )
            update |= {"error_text": None, "finish_reason": None}
        return turn.model_copy(update=update), decided.submission

    @staticmethod
    def _clean(stored: Reduction, message_id: str) -> None:
        """What is stored: without provider-ephemeral metadata, within the row size limit
        (domain/storage_hygiene.py). The log keeps every chunk as streamed."""
        clean = for_storage(stored.parts, stored.metadata)
        if clean.compacted:
            log.warning(
                "the answer %s is %d bytes: compacted to %d for storage (metadata says what)",
                message_id,
                clean.original_bytes,
                clean.stored_bytes,
            )
        stored.parts, stored.metadata = clean.parts, clean.metadata

    async def _exhausted(
        self,
        agent: Agent | None,
        turn: FinishTurnInput,
        read: list[tuple[int, Chunk]],
        terminal_message: str,
    ) -> None:
        """Before the terminal answer is visible (docs/recovery.md), when this finish writes it.
        At least once: a crash between here and the store's commit calls it again on the
        retry."""
        logged = [chunk for _, chunk in read]
        if not closing_chunks(logged, turn, terminal_message):
            return
        incident = await load_incident(self._db, submission_id=turn.turn.submission_id)
        reason = turn.error_text or "recovery exhausted"
        await emit(
            self._db,
            session_id=turn.turn.session_id,
            submission_id=turn.turn.submission_id,
            type="chat.recovery.exhausted",
            reason=reason,
        )
        if agent is None:
            return
        context = ExhaustedContext(
            incident_id=incident.incident_id if incident else turn.turn.submission_id,
            request_id=turn.turn.submission_id,
            stream_id=turn.turn.assistant_message_id,
            session_id=turn.turn.session_id,
            reason=reason,
            partial_text=reduce_chunks(logged).text(),
            terminal_message=terminal_message,
        )
        await run_hook(
            "on_exhausted",
            lambda: agent.on_exhausted(context),
            limit=agent.hook_timeout.total_seconds(),
        )


class FinishTurnActivity:
    """`perdure.finish_turn`: the workflow's last activity (a local one), retried until it
    succeeds. It does not heartbeat: a local activity has no heartbeat timeout, and the
    workflow shields it from a stop."""

    def __init__(self, finisher: TurnFinisher) -> None:
        self._finisher = finisher

    @activity.defn(name=FINISH_TURN_ACTIVITY)
    async def finish_turn(self, turn: FinishTurnInput) -> FinishTurnResult:
        return await self._finisher.finish(turn, writer=current_writer())
