"""Durable recovery through the whole stack, with faults injected by the fake provider."""

import asyncio
import uuid
from typing import Any

import httpx
import pytest

from activities.providers import CONTINUE_INSTRUCTION
from perdure.testing.agents import chat as agents
from perdure.testing.chat_client import counting, key_of, read_stream, send
from tests.e2e.test_chat_turn import new_session, wait_idle


def unique(text: str) -> str:
    """Fault budgets are counted per user text: keep every test's text its own."""
    return f"{text} {uuid.uuid4().hex[:8]}"


def notices(streamed: Any) -> list[dict[str, Any]]:
    return [c for c in streamed.chunks if c["type"] == "data-recovery"]


async def events_of(http: httpx.AsyncClient, session: str) -> list[str]:
    return [e["type"] for e in (await http.get(f"/v1/sessions/{session}/events")).json()]


async def stored_answer(http: httpx.AsyncClient, session: str) -> dict[str, Any]:
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    assert [m["role"] for m in history].count("assistant") == 1
    answer: dict[str, Any] = history[-1]
    return answer


def text_of(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


async def test_a_dropped_provider_stream_continues_the_same_message_exactly(
    http: httpx.AsyncClient, fake_provider
) -> None:
    session = new_session()
    text = unique("@count 80 @delay 2 @disconnect_after 30")

    streamed = await send(http, session, text)

    assert streamed.text() == counting(80)
    assert streamed.types()[-1] == "finish"
    (notice,) = notices(streamed)
    assert notice["transient"] is True
    assert notice["data"]["attempt"] == 1
    assert notice["data"]["maxAttempts"] == 3
    assert notice["data"]["kind"] == "continue"
    assert [c["messageId"] for c in streamed.chunks if c["type"] == "start"] == [
        streamed.chunks[0]["messageId"]
    ]
    answer = await stored_answer(http, session)
    assert text_of(answer) == counting(80)
    assert len([p for p in answer["parts"] if p["type"] == "text"]) == 1
    first, second = fake_provider.requests_for(text)
    assert second.body["messages"][-2]["role"] == "assistant"  # the partial
    assert second.body["messages"][-1] == {"role": "user", "content": CONTINUE_INSTRUCTION}
    assert await events_of(http, session) == [
        "chat.recovery.detected",
        "chat.recovery.attempt",
        "chat.recovery.completed",
    ]


async def test_a_failure_before_any_text_retries_the_turn_without_a_second_user_message(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()

    streamed = await send(http, session, unique("@count 10 @fail 503 x1"))

    assert streamed.text() == counting(10)
    assert notices(streamed)[0]["data"]["kind"] == "retry"
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    assert [m["role"] for m in history] == ["user", "assistant"]


async def test_a_stalled_provider_is_aborted_and_the_turn_recovers(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()

    streamed = await send(http, session, unique("@count 40 @stall_after 12"), agent="stalling")

    assert streamed.text() == counting(40)
    assert "chat.stream.stalled" in await events_of(http, session)


@pytest.mark.parametrize("agent", ["anthropic", "responses"])
async def test_every_provider_api_recovers_a_broken_stream_exactly(
    http: httpx.AsyncClient, fake_provider, agent: str
) -> None:
    fault = "@midstream_error 25" if agent == "anthropic" else "@disconnect_after 25"
    text = unique(f"@count 70 @delay 2 {fault}")

    streamed = await send(http, new_session(), text, agent=agent)

    assert streamed.text() == counting(70)
    routes = [r.route for r in fake_provider.requests_for(text)]
    if agent == "responses":
        assert routes == ["responses", "responses.retrieve"]  # re-attached, not regenerated


async def test_a_model_that_refuses_an_unexpected_prefill_is_continued_by_instruction(
    http: httpx.AsyncClient, fake_provider
) -> None:
    session = new_session()
    text = unique("@count 50 @delay 2 @disconnect_after 20 @reject_prefill")

    streamed = await send(http, session, text, agent="anthropic")

    assert streamed.text() == counting(50)
    assert [n["data"].get("kind") for n in notices(streamed)] == ["continue"]
    answer = await stored_answer(http, session)
    assert [p["text"] for p in answer["parts"] if p["type"] == "text"] == [counting(50)]
    statuses = [r.status for r in fake_provider.requests_for(text)]
    assert statuses == [200, 400, 200]  # the prefill's 400, then the instruction


@pytest.mark.parametrize("agent", ["claude-4-6", "claude-4-7"])
async def test_todays_claude_continues_a_broken_answer_exactly_without_a_prefill(
    http: httpx.AsyncClient, fake_provider, agent: str
) -> None:
    session = new_session()
    text = unique("@count 60 @delay 2 @disconnect_after 20")

    streamed = await send(http, session, text, agent=agent)

    assert streamed.text() == counting(60)
    answer = await stored_answer(http, session)
    assert [p["text"] for p in answer["parts"] if p["type"] == "text"] == [counting(60)]
    first, second = fake_provider.requests_for(text)  # no 400 on the way
    assert (first.status, second.status) == (200, 200)
    assert second.body["messages"][-1]["content"] == [
        {"type": "text", "text": CONTINUE_INSTRUCTION}
    ]


async def test_a_thinking_answer_continued_by_instruction_keeps_one_text_part(
    http: httpx.AsyncClient, fake_provider
) -> None:
    session = new_session()
    text = unique("@count 60 @delay 2 @disconnect_after 20")

    streamed = await send(http, session, text, agent="thinking-4-7")

    assert streamed.text() == counting(60)
    answer = await stored_answer(http, session)
    assert [p["type"] for p in answer["parts"] if p["type"] in ("text", "reasoning")] == [
        "reasoning",
        "text",
    ]
    first, second = fake_provider.requests_for(text)
    assert first.body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert first.body["output_config"] == {"effort": "high"}


async def test_an_exhausted_budget_ends_with_the_terminal_message(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    agents.exhausted_contexts.clear()

    # 4 tokens, then a provider that never produces again: attempts make no progress
    script = "@count 30 @stall_after 4 @stall_after 0 x100"
    streamed = await send(http, session, unique(script), agent="observed-stalling")

    terminal = "Sorry, I could not finish that answer."
    assert streamed.done
    assert streamed.types()[-1] == "error"
    assert streamed.chunks[-1]["errorText"] == terminal
    assert streamed.text() == counting(4) + terminal
    assert len(agents.exhausted_contexts) == 1
    assert agents.exhausted_contexts[0].partial_text.startswith(counting(4))
    answer = await stored_answer(http, session)
    assert answer["metadata"]["status"] == "error"
    assert text_of(answer).endswith(terminal)
    assert "chat.recovery.exhausted" in await events_of(http, session)
    assert (await http.get(f"/v1/sessions/{session}")).json()["status"] == "idle"
    assert (await http.get(f"/api/chat/{session}/stream")).status_code == 204
    replay = await read_stream(http, "GET", f"/api/chat/{session}/stream?after=0")
    assert replay.types()[-1] == "error"


async def test_recovery_hooks_get_the_context_of_the_interrupted_turn(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    agents.recovery_contexts.clear()
    text = unique("@count 60 @delay 2 @disconnect_after 15")

    await send(http, session, text, agent="observed", message_id="the-question")

    (ctx,) = agents.recovery_contexts
    assert ctx.attempt == 1
    assert ctx.max_attempts == 2
    assert ctx.kind == "continue"
    assert ctx.session_id == key_of(session)  # hooks know a session by its storage key
    assert counting(60).startswith(ctx.partial_text) and ctx.partial_text
    assert any(p["type"] == "text" for p in ctx.partial_parts)
    assert ctx.last_body["id"] == "the-question"
    assert ctx.messages[-1].id == "the-question"
    assert ctx.incident_id.endswith(":the-question")
    assert ctx.recovery_data is None


@pytest.mark.parametrize(("keep", "kept_text"), [(True, True), (False, False)])
async def test_a_hook_that_declines_recovery_stops_cleanly(
    http: httpx.AsyncClient, keep: bool, kept_text: bool
) -> None:
    session = new_session()
    word = "keep" if keep else "drop"

    streamed = await send(
        http, session, unique(f"@count 60 @delay 2 @disconnect_after 15 {word}"), agent="quitter"
    )

    assert streamed.types()[-1] == "error"
    assert "recovery skipped" in streamed.chunks[-1]["errorText"]
    assert "chat.recovery.skipped" in await events_of(http, session)
    answer = await stored_answer(http, session)
    assert bool(text_of(answer)) is kept_text


async def test_a_throwing_recovery_hook_falls_back_to_recovering(http: httpx.AsyncClient) -> None:
    session = new_session()
    agents.broken_hook_calls.clear()

    streamed = await send(
        http,
        session,
        unique("@count 40 @delay 2 @disconnect_after 10 @disconnect_after 10"),
        agent="broken-hook",
    )

    assert streamed.text() == counting(40)
    (incident,) = set(agents.broken_hook_calls) - {
        c for c in agents.broken_hook_calls if c.startswith("keep:")
    }
    # Both hooks were called and raised: on_chat_recovery on each attempt, the predicate on
    # the second; each failure meant the default (recover).
    assert agents.broken_hook_calls == [incident, f"keep:{incident}", incident]
    assert len(notices(streamed)) == 2


async def test_should_keep_recovering_is_asked_from_the_second_attempt_and_may_end_the_turn(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    agents.keep_recovering_contexts.clear()

    streamed = await send(
        http,
        session,
        unique("@count 60 @delay 2 @disconnect_after 10 @disconnect_after 10"),
        agent="gives-up",
    )

    assert [ctx.attempt for ctx in agents.keep_recovering_contexts] == [1]  # after progress
    assert len(notices(streamed)) == 1
    assert streamed.chunks[-1] == {"type": "error", "errorText": "Given up."}
    events = (await http.get(f"/v1/sessions/{session}/events")).json()
    (exhausted,) = [e for e in events if e["type"] == "chat.recovery.exhausted"]
    assert "recovery_aborted" in exhausted["data"]["reason"]


async def test_a_turn_older_than_the_policys_max_age_is_not_recovered(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()

    streamed = await send(
        http, session, unique("@count 60 @delay 40 @disconnect_after 40"), agent="short-lived"
    )

    assert notices(streamed) == []
    assert streamed.chunks[-1] == {"type": "error", "errorText": "Too old."}
    assert streamed.text().startswith(counting(40))  # the partial is kept
    events = (await http.get(f"/v1/sessions/{session}/events")).json()
    (exhausted,) = [e for e in events if e["type"] == "chat.recovery.exhausted"]
    assert "max_age_exceeded" in exhausted["data"]["reason"]


async def test_the_recovery_context_dates_the_turn_from_its_start(
    http: httpx.AsyncClient,
) -> None:
    agents.recovery_contexts.clear()

    await send(
        http, new_session(), unique("@count 60 @delay 20 @disconnect_after 15"), agent="observed"
    )

    (ctx,) = agents.recovery_contexts
    assert ctx.incident_seen_at is not None
    # 15 deltas 20 ms apart streamed between the turn's start and the incident
    assert (ctx.incident_seen_at - ctx.created_at).total_seconds() >= 0.3


async def test_stashed_data_is_handed_to_the_recovery_hook(http: httpx.AsyncClient) -> None:
    agents.recovery_contexts.clear()
    # the tool-call step streams normally; the answer after it breaks after two words
    text = unique('@tool remember {"note": "order 42"}\n@disconnect_after 1000 @disconnect_after 2')

    await send(http, new_session(), text, agent="observed")

    assert agents.recovery_contexts[-1].recovery_data == {"note": "order 42"}


async def until_submissions(
    http: httpx.AsyncClient, session: str, *, at_least: int, status: str | None = None
) -> None:
    """Until the session holds `at_least` submissions (of `status`), polled for at most 30 s."""
    params = {"status": status} if status else {}
    async with asyncio.timeout(30):
        while True:
            response = await http.get(f"/v1/sessions/{session}/submissions", params=params)
            if response.status_code == 200 and response.json()["count"] >= at_least:
                return
            await asyncio.sleep(0.02)


async def interrupted_with_follow_ups(
    http: httpx.AsyncClient, session: str, agent: str
) -> tuple[Any, Any, Any]:
    """A 60-word answer (`u1`) broken after 20 words, with two follow-ups (`u2`, `u3`: 3 and 4
    words) queued behind it, in that order, before its recovery looks at the queue (the agent
    holds its recovery until then: `agents.recovery_gate`): the three streams, once ended."""
    agents.recovery_gate = gate = asyncio.Event()
    try:
        first = asyncio.create_task(
            send(
                http,
                session,
                unique("@count 60 @delay 5 @disconnect_after 20"),
                message_id="u1",
                agent=agent,
            )
        )
        await until_submissions(http, session, at_least=1)
        second = asyncio.create_task(send(http, session, "@count 3", message_id="u2"))
        await until_submissions(http, session, at_least=1, status="pending")
        third = asyncio.create_task(send(http, session, "@count 4", message_id="u3"))
        await until_submissions(http, session, at_least=2, status="pending")
        gate.set()
        return await first, await second, await third
    finally:
        agents.recovery_gate = None


async def test_follow_ups_sent_during_a_recovery_run_afterwards_in_order(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    agents.boot_contexts.clear()
    first, second, third = await interrupted_with_follow_ups(http, session, "boot-observer")

    # The recovery booted with both follow-ups queued behind the interrupted turn.
    (boot,) = agents.boot_contexts
    assert [f.message.id for f in boot.queued] == ["u2", "u3"]
    assert boot.in_flight_user.id == "u1" and boot.partial is not None
    assert len(notices(first)) == 1
    assert first.text() == counting(60)
    assert (second.text(), third.text()) == (counting(3), counting(4))
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    assert [m["id"] for m in history if m["role"] == "user"] == ["u1", "u2", "u3"]


async def test_a_recovery_boot_hook_can_drop_queued_follow_ups(http: httpx.AsyncClient) -> None:
    session = new_session()
    first, second, third = await interrupted_with_follow_ups(http, session, "last-follow-up-only")

    assert first.text() == counting(60)
    assert second.types()[-1] == "abort"
    assert second.chunks[-1]["reason"] == "skipped-by-recovery"
    assert third.text() == counting(4)
    await wait_idle(http, session)
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    assert [m["id"] for m in history if m["role"] == "user"] == ["u1", "u3"]


async def test_an_on_exhausted_hook_that_raises_still_ends_the_turn_with_the_terminal_message(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    agents.raising_hook_calls.clear()

    script = "@count 30 @stall_after 4 @stall_after 0 x100"
    streamed = await send(http, session, unique(script), agent="raising-endings")

    assert agents.raising_hook_calls.count("on_exhausted") == 1
    assert streamed.chunks[-1] == {"type": "error", "errorText": "Ended."}
    await wait_idle(http, session)
    following = await send(http, session, "and now?", agent="default")
    assert following.text() == "You said: and now?"


async def test_a_recovery_boot_hook_that_raises_falls_back_to_the_default_plan(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    agents.raising_hook_calls.clear()
    first, second, third = await interrupted_with_follow_ups(http, session, "raising-endings")

    assert agents.raising_hook_calls == ["on_recovery_boot"]
    assert len(notices(first)) == 1
    assert (first.text(), second.text(), third.text()) == (counting(60), counting(3), counting(4))


async def test_an_agent_may_give_a_turn_its_own_stall_timeout(http: httpx.AsyncClient) -> None:
    """The policy's 0.5 s would abort a first token 1.5 s away; the turn's 3 s does not."""
    session = new_session()

    streamed = await send(http, session, unique("@ttft 1500 @count 5"), agent="patient-turns")

    assert streamed.text() == counting(5)
    assert notices(streamed) == []
    assert "chat.stream.stalled" not in await events_of(http, session)


def assistant_texts(body: dict[str, Any]) -> list[str]:
    """The assistant messages' text of a Chat Completions request body."""
    return [str(m.get("content") or "") for m in body["messages"] if m.get("role") == "assistant"]


async def test_a_recovery_boot_plan_may_drop_the_partial_so_the_model_answers_afresh(
    http: httpx.AsyncClient, fake_provider: Any
) -> None:
    session = new_session()
    text = unique("@count 40 @delay 2 @disconnect_after 10")
    follow_up = unique("@count 2")

    streamed = await send(http, session, text, agent="drops-partial")
    await send(http, session, follow_up, agent="drops-partial")

    # The client saw the partial, then the fresh answer as a text of its own.
    assert streamed.text() == counting(10) + counting(40)
    recovery = fake_provider.requests_for(text)[1]
    assert assistant_texts(recovery.body) == []  # no prefill: the partial was dropped
    assert CONTINUE_INSTRUCTION not in str(recovery.body)
    # The stored answer keeps what the client saw; the model never sees the dropped step.
    answer = (await http.get(f"/api/chat/{session}/messages")).json()[1]
    assert "data-dropped-step" in [p["type"] for p in answer["parts"]]
    (later,) = fake_provider.requests_for(follow_up)
    assert assistant_texts(later.body) == [counting(40)]


async def test_a_recovery_boot_plan_may_give_pending_tool_calls_their_results(
    http: httpx.AsyncClient, fake_provider: Any
) -> None:
    session = new_session()
    text = unique('@tool wait {"seconds": 5} @disconnect_after 1')

    streamed = await send(http, session, text, agent="settles-pending-calls")

    outputs = [c for c in streamed.chunks if c["type"] == "tool-output-available"]
    assert [o["output"] for o in outputs] == ["synthesized"]  # the tool itself never ran
    assert streamed.text() == "Tool wait returned: synthesized"
    assert "chat.transcript.repaired" not in await events_of(http, session)


async def test_a_recovery_boot_plans_history_holds_for_every_later_step_of_the_turn(
    http: httpx.AsyncClient, fake_provider: Any
) -> None:
    session = new_session()
    text = unique('@tool wait {"seconds": 0}\n@tool wait {"seconds": 0} @disconnect_after 1')

    streamed = await send(http, session, text, agent="rewrites-history")

    assert streamed.types()[-1] == "finish"
    requests = fake_provider.requests_for(text)
    assert len(requests) >= 3  # the first step, its recovery, and a step after a tool
    assert [agents.BOOT_NOTE in str(r.body) for r in requests] == [False] + [True] * (
        len(requests) - 1
    )


@pytest.mark.parametrize("agent", ["thinking-4-7", "thinking"])
async def test_a_thinking_turn_keeps_its_thinking_through_two_tool_calls(
    http: httpx.AsyncClient, fake_provider, agent: str
) -> None:
    session = new_session()
    text = unique('@tool wait {"seconds": 0}\n@tool wait {"seconds": 0}')

    streamed = await send(http, session, text, agent=agent)

    assert streamed.text().endswith("Tool wait returned: waited 0.0 s")
    requests = fake_provider.requests_for(text)
    assert [r.status for r in requests] == [200, 200, 200]
    for request in requests:
        assert request.body["thinking"]["type"] in ("adaptive", "enabled")
    for later in requests[1:]:  # each tool loop passes the signed thinking back, first
        assistant = [m for m in later.body["messages"] if m["role"] == "assistant"]
        assert all(m["content"][0]["type"] == "thinking" for m in assistant)
        assert all(m["content"][0]["signature"] for m in assistant)
    answer = await stored_answer(http, session)
    reasoning = [p for p in answer["parts"] if p["type"] == "reasoning"]
    assert len(reasoning) == 3
    assert all(p["providerMetadata"]["anthropic"]["signature"] for p in reasoning)


async def test_a_reasoning_model_s_tool_loop_passes_its_reasoning_items_back(
    http: httpx.AsyncClient, fake_provider
) -> None:
    session = new_session()
    text = unique('@tool wait {"seconds": 0}\n@tool wait {"seconds": 0}')

    streamed = await send(http, session, text, agent="responses-reasoning")

    assert streamed.text().endswith("Tool wait returned: waited 0.0 s")
    requests = fake_provider.requests_for(text)
    assert [r.status for r in requests] == [200, 200, 200]
    referenced = [
        [i["id"] for i in request.body["input"] if i.get("type") == "item_reference"]
        for request in requests
    ]
    assert [len(ids) for ids in referenced] == [0, 1, 2]  # each earlier step's reasoning item
    assert referenced[2][:1] == referenced[1]
    answer = await stored_answer(http, session)
    reasoning = [p for p in answer["parts"] if p["type"] == "reasoning"]
    assert len(reasoning) == 3 and all(p["text"] for p in reasoning)  # summarized
    # The stored answer drops the item ids: a later turn must not reference a response that
    # OpenAI may no longer keep.
    assert all("openai" not in (p.get("providerMetadata") or {}) for p in reasoning)
