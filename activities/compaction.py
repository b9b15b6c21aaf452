"""Compaction: a model call summarizes the older part of the active path; the summary then
stands in for it in what the model sees (the stored history stays whole)."""

import asyncio
from contextlib import aclosing

from activities.events import emit
from activities.providers import ModelRequest, Provider
from activities.step_request import StepPlan
from activities.step_run import StepRun
from perdure.domain.compaction import (
    Overlaid,
    cut_point,
    estimate_tokens,
    with_summary,
)
from perdure.domain.conversation import UserItem, to_conversation
from perdure.domain.provider_events import TextDelta
from storage.compactions import save_compaction
from storage.db import Database

SUMMARIZER = (
    "You compress conversations. Summarize the conversation you are given so that an "
    "assistant can go on with it without seeing it: the user's goals and constraints, facts, "
    "decisions, names, numbers, open questions and what tools returned that still matters. "
    "Write plain prose, as short as it can be while keeping all of that."
)
INSTRUCTION = "Summarize the conversation above, as instructed."
SUMMARY_TIMEOUT = 120.0
SUMMARY_TOKENS = 1024


class Compactor:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def compact(
        self, run: StepRun, plan: StepPlan, current: Overlaid, *, reason: str
    ) -> Overlaid | None:
        """Summarize the current summary (if any) and the older messages of the step's
        conversation into a new one; None when there is too little to summarize."""
        session_id, submission_id = run.step.turn.session_id, run.step.turn.submission_id
        cut = cut_point(current.recent, run.agent.compact_keep_messages)
        if cut is None:
            return None
        covered, kept = current.recent[: cut + 1], current.recent[cut + 1 :]
        request = ModelRequest(
            model=plan.provider_model,
            system=with_summary(SUMMARIZER, current.summary),
            conversation=[*to_conversation(covered), UserItem(text=INSTRUCTION)],
            max_output_tokens=SUMMARY_TOKENS,
        )
        summary = await self._summary(run.provider, request)
        before = estimate_tokens(
            with_summary(plan.system, current.summary), to_conversation(current.recent)
        )
        after = estimate_tokens(with_summary(plan.system, summary), to_conversation(kept))
        row = await save_compaction(
            self._db,
            session_id=session_id,
            up_to_message_id=covered[-1].id,
            summary=summary,
            tokens_before=before,
            tokens_after=after,
        )
        await emit(
            self._db,
            session_id=session_id,
            submission_id=submission_id,
            type="chat.context.compacted",
            compactionId=row.id,
            upToMessageId=row.up_to_message_id,
            tokensBefore=before,
            tokensAfter=after,
            reason=reason,
        )
        return Overlaid(summary, kept)

    async def _summary(self, provider: Provider, request: ModelRequest) -> str:
        parts: list[str] = []
        async with asyncio.timeout(SUMMARY_TIMEOUT), aclosing(provider.stream(request)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    parts.append(event.text)
        summary = "".join(parts).strip()
        if not summary:
            raise ValueError("the model gave an empty summary")
        return summary
