"""The provider call of a model step: compact when the request is too long, stream it into
the log (traced and metered), and go on from the failures a request can go on from."""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from temporalio import activity

from activities._support import call_hook
from activities.compaction import Compactor
from activities.errors import provider_failure
from activities.events import emit
from activities.providers import ModelRequest, Provider, ProviderError
from activities.step_request import StepPlan, over_compaction_threshold
from activities.step_run import StepRun
from activities.watched_stream import ProviderStalled, StreamTarget, stream_into_log
from perdure.agent import Agent, TurnContext
from perdure.domain.compaction import Overlaid
from perdure.domain.reducer import reduce_chunks
from perdure.domain.step_chunks import StepChunker
from perdure.domain.step_state import step_state
from perdure.telemetry import genai_spans, metrics
from storage.chunks import load_log
from storage.db import Database

log = logging.getLogger(__name__)

PROVIDER_CANCEL_TIMEOUT = 5.0

Shorter = Callable[[], Awaitable[ModelRequest | None]]
"""A compacted request, or None when there is too little to compact."""


@dataclass(frozen=True)
class StepCall:
    """The step's request as sent: the attempt, its plan, where it stands in the log."""

    run: StepRun
    plan: StepPlan
    log_step: int
    stall: float
    """Seconds without a chunk after which the stream is aborted."""


class _Compaction:
    """The conversation the step shows the model: shortened by each compaction."""

    def __init__(self, compactor: Compactor, run: StepRun, plan: StepPlan, seen: Overlaid):
        self._compactor = compactor
        self._run = run
        self._plan = plan
        self.current = seen

    async def compacted(self, reason: str) -> ModelRequest | None:
        shorter = await self._compactor.compact(self._run, self._plan, self.current, reason=reason)
        if shorter is None:
            return None
        self.current = shorter
        return self._plan.request(shorter)


class StepCaller:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._compactor = Compactor(db)

    async def call(
        self, run: StepRun, plan: StepPlan, log_step: int, seen: Overlaid
    ) -> StepChunker:
        """Compact when the request is over the agent's threshold (or the provider's window),
        and stream it into the log, traced and metered."""
        compaction = _Compaction(self._compactor, run, plan, seen)
        request = plan.request(seen)
        if over_compaction_threshold(run.agent, request):
            request = await compaction.compacted("threshold") or request
        stall = await turn_stall_timeout(run.agent, run.context)
        call = StepCall(run=run, plan=plan, log_step=log_step, stall=stall)
        with genai_spans.model_call(
            plan.model,
            session_id=run.step.turn.session_id,
            max_output_tokens=request.max_output_tokens,
            step=log_step,
            attempt=run.attempt,
        ) as span:
            chunker = await self._stream(
                call, request, on_overflow=lambda: compaction.compacted("context_overflow")
            )
            usage = chunker.finish
            span.finished(
                usage.reason if usage else None,
                usage.input_tokens if usage else None,
                usage.output_tokens if usage else None,
            )
        if usage is not None:
            metrics.model_tokens(plan.model, usage.input_tokens, usage.output_tokens)
        run.writer.add(chunker.close())
        return chunker

    async def _stream(
        self, call: StepCall, request: ModelRequest, *, on_overflow: Shorter
    ) -> StepChunker:
        """Stream the step; on a provider error go on as `_Fallbacks` allows."""
        run = call.run
        chunker = StepChunker(
            run.step.step, attempt=run.attempt, open_text_id=call.plan.state.open_text_id
        )
        fallbacks = _Fallbacks(self._db, run, on_overflow)
        while True:
            target = StreamTarget(writer=run.writer, chunker=chunker, log_step=call.log_step)
            try:
                await stream_into_log(run.provider, request, target, stall_timeout=call.stall)
                return chunker
            except ProviderStalled:
                await self._stalled(call)
                raise
            except ProviderError as error:
                metrics.provider_error(run.model, error)
                await run.writer.flush()
                following = await fallbacks.following(request, error)
                if following is None:
                    raise provider_failure(error, label=run.provider.label) from error
                request = following
            except asyncio.CancelledError:
                details = activity.cancellation_details()
                if details is None or (details.cancel_requested and not details.worker_shutdown):
                    # Stopped by the user: the background response must not run on at the
                    # provider. A worker shutdown, or an attempt Temporal timed out or no
                    # longer knows (heartbeats late on a busy machine), hands the step over
                    # instead: the response runs on and the next attempt re-attaches to it.
                    await asyncio.shield(cancel_at_provider(run.provider, target.last_cursor))
                await run.writer.flush()
                raise
            except BaseException:
                await run.writer.flush()
                raise

    async def _stalled(self, call: StepCall) -> None:
        run = call.run
        metrics.provider_stalled(run.model)
        await run.writer.flush()
        await emit(
            self._db,
            session_id=run.step.turn.session_id,
            submission_id=run.step.turn.submission_id,
            type="chat.stream.stalled",
            stallTimeoutSeconds=call.stall,
            step=call.log_step,
        )


class _Fallbacks:
    """How a failed request goes on: from a lost resumable response to a prefill, from a full
    context window to a compacted request (once), and from a refused prefill to the continue
    instruction."""

    def __init__(self, db: Database, run: StepRun, on_overflow: Shorter) -> None:
        self._db = db
        self._run = run
        self._on_overflow: Shorter | None = on_overflow

    async def following(self, request: ModelRequest, error: ProviderError) -> ModelRequest | None:
        """The request to send next; None when the error ends the attempt."""
        run = self._run
        if request.resume is not None and not error.retryable:
            # The failed re-attach may have streamed more of the step: continue from what
            # the log holds now, not from where this attempt began.
            logged = await load_log(self._db, message_id=run.step.turn.assistant_message_id)
            prefill = step_state(reduce_chunks(logged), run.step.step).prefill
            request = request.model_copy(update={"resume": None, "prefill": prefill})
            log.warning(
                "cannot re-attach (%s); continuing by %s",
                error,
                run.provider.continuation_for(request).via,
            )
            return request
        if error.context_overflow and self._on_overflow is not None:
            shorter, self._on_overflow = await self._on_overflow(), None
            if shorter is not None:
                return shorter
        if error.prefill_rejected and request.prefill and not request.prefill_refused:
            # A model whose rules were not known (PERDURE_MODEL_FAMILIES): the text goes on
            # by instruction, never by answering the step again.
            log.warning("%s refused a prefill; continuing by instruction", run.model)
            return request.model_copy(update={"prefill_refused": True})
        return None


async def cancel_at_provider(provider: Provider, cursor: dict[str, Any] | None) -> None:
    """Best effort, bounded: stop a server-side response nobody will read any more."""
    if not provider.supports_cancel or not cursor or "response_id" not in cursor:
        return
    try:
        async with asyncio.timeout(PROVIDER_CANCEL_TIMEOUT):
            await provider.cancel(str(cursor["response_id"]))
    except Exception as error:  # noqa: BLE001 - the turn ends either way
        log.warning("could not cancel response %s at %s: %s", cursor, provider.label, error)


async def turn_stall_timeout(agent: Agent, context: TurnContext) -> float:
    """The agent's stall timeout for this turn, in seconds (the policy's if its hook fails)."""
    try:
        chosen = await call_hook(
            "stall_timeout",
            lambda: agent.stall_timeout(context),
            limit=agent.hook_timeout.total_seconds(),
        )
        seconds = chosen.total_seconds()
        if seconds <= 0:
            raise ValueError(f"stall_timeout must be positive, not {chosen}")
        return seconds
    except Exception:
        log.exception("stall_timeout failed; using the recovery policy's")
        return agent.recovery.stall_timeout.total_seconds()
