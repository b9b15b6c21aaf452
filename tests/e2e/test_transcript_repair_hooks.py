"""An agent's `repair_interrupted_tool_part` decides how an interrupted call is settled."""

from typing import Any

from activities.transcript_repair import repair_transcript
from perdure import Agent
from perdure.domain.conversation import to_conversation
from perdure.domain.reducer import reduce_chunks
from perdure.domain.repair import INTERRUPTED_TOOL_TEXT, unsettled_tool_parts
from perdure.domain.ui import Chunk, UIMessage
from storage.db import Database
from storage.events import list_events
from storage.intake import submit
from tests.submitting import user_submission

INTERRUPTED: list[Chunk] = [
    {"type": "start", "messageId": "msg_repair"},
    {"type": "start-step"},
    {"type": "text-start", "id": "t"},
    {"type": "text-delta", "id": "t", "delta": "Refunding now."},
    {"type": "text-end", "id": "t"},
    {
        "type": "tool-input-available",
        "toolCallId": "call-1",
        "toolName": "refund",
        "input": {"order": 7},
    },
]


class AssumesDone(Agent):
    name = "assumes-done"

    async def repair_interrupted_tool_part(self, part: dict[str, Any]) -> dict[str, Any]:
        return {**part, "state": "output-available", "output": {"assumed": "done"}}


class SaysItInWords(Agent):
    name = "says-it-in-words"

    async def repair_interrupted_tool_part(self, part: dict[str, Any]) -> dict[str, Any]:
        return {"type": "text", "text": f"I could not finish {part['toolCallId']}; ask again."}


class BrokenRepair(Agent):
    name = "broken-repair"

    async def repair_interrupted_tool_part(self, part: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("this repair is broken")


async def repaired_with(agent: Agent, store: Database) -> tuple[list[Chunk], str]:
    outcome = await submit(
        store,
        user_submission(f"repair-{agent.name}", "refund order 7", key=f"repair-{agent.name}"),
    )
    session_id = outcome.submission.session_id
    chunks = await repair_transcript(
        agent,
        reduce_chunks(INTERRUPTED),
        db=store,
        session_id=session_id,
        submission_id=outcome.submission.id,
    )
    return chunks, session_id


async def test_an_agent_may_settle_an_interrupted_call_with_a_result(store: Database) -> None:
    chunks, session_id = await repaired_with(AssumesDone(), store)

    assert chunks == [
        {"type": "tool-output-available", "toolCallId": "call-1", "output": {"assumed": "done"}}
    ]
    (event,) = await list_events(store, session_id=session_id)
    assert event.type == "chat.transcript.repaired"
    assert event.data["toolCallIds"] == ["call-1"]


async def test_an_agent_may_say_in_words_what_became_of_an_interrupted_call(
    store: Database,
) -> None:
    chunks, _ = await repaired_with(SaysItInWords(), store)

    answer = reduce_chunks(INTERRUPTED + chunks)
    assert unsettled_tool_parts(answer) == []
    assert answer.text().endswith("I could not finish call-1; ask again.")
    assert [p["type"] for p in answer.parts][-1] == "text"
    # Every provider needs each call answered: the call keeps an errored result.
    message = UIMessage.model_validate(
        {"id": "msg_repair", "role": "assistant", "parts": answer.parts}
    )
    conversation = to_conversation([message])
    assert "I could not finish call-1; ask again." in str(conversation)


async def test_a_repair_hook_that_raises_falls_back_to_the_default(store: Database) -> None:
    chunks, _ = await repaired_with(BrokenRepair(), store)

    assert chunks == [
        {"type": "tool-output-error", "toolCallId": "call-1", "errorText": INTERRUPTED_TOOL_TEXT}
    ]
