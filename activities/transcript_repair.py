"""Before every model call: settle tool calls that never got a result (never re-run them)."""

import functools
import logging

from activities._support import call_hook
from activities.events import emit
from perdure.agent import Agent
from perdure.domain.reducer import Reduction
from perdure.domain.repair import default_repair, repair_chunks, unsettled_tool_parts
from perdure.domain.ui import Chunk
from storage.db import Database

log = logging.getLogger(__name__)


async def repair_transcript(
    agent: Agent, reduction: Reduction, *, db: Database, session_id: str, submission_id: str
) -> list[Chunk]:
    """The chunks that settle every interrupted tool part (empty when nothing needs it)."""
    unsettled = unsettled_tool_parts(reduction)
    if not unsettled:
        return []
    chunks: list[Chunk] = []
    normalized: list[str] = []
    for part in unsettled:
        try:
            repaired = await call_hook(
                "repair_interrupted_tool_part",
                functools.partial(agent.repair_interrupted_tool_part, dict(part)),
                limit=agent.hook_timeout.total_seconds(),
            )
        except Exception:
            log.exception("repair_interrupted_tool_part failed; using the default repair")
            repaired = default_repair(part)
        if not isinstance(part.get("input"), dict):
            normalized.append(part["toolCallId"])
        chunks.extend(repair_chunks(part, repaired))
    await emit(
        db,
        session_id=session_id,
        submission_id=submission_id,
        type="chat.transcript.repaired",
        toolCallIds=[part["toolCallId"] for part in unsettled],
        normalizedInputs=normalized,
    )
    return chunks
