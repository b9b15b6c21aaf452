"""The chat page (web/, served at `/`) in chromium against a real stack: what a person sees and
does. The fake model answers `@count N` with "1 2 … N", one word every `@delay MS`; the
`approvals` agent's tools wait for a person (perdure/testing/agents/approvals.py)."""

import os
import re
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, Request, expect

from perdure.testing.agents.approvals import tool_runs
from perdure.testing.fakeprovider.anthropic import THINKING
from tests.browser.conftest import README_SCREENSHOT, ChatPage
from tests.fakeprovider_fixtures import count_to, tag
from tests.waiting import eventually

pytestmark = pytest.mark.parametrize("stack", ["sqlite"], indirect=True)


async def stored_messages(chat: ChatPage) -> list[dict[str, object]]:
    async with httpx.AsyncClient(base_url=chat.stack.url) as http:
        response = await http.get(f"/api/chat/{chat.chat_id}/messages")
        response.raise_for_status()
        messages: list[dict[str, object]] = response.json()
        return messages


async def test_a_sent_message_is_answered_on_the_page(chat: ChatPage) -> None:
    await chat.open()
    await chat.shot("empty")

    await chat.send("@count 5")

    await expect(chat.answer).to_have_text(count_to(5))
    await expect(chat.page.locator(f'li[data-session-id="{chat.chat_id}"]')).to_be_visible()
    await chat.shot("answered")
    assert chat.problems == [], "\n".join(chat.problems)


async def test_an_answer_shows_what_its_turn_used_live_and_after_a_reload(chat: ChatPage) -> None:
    await chat.open()

    await chat.send("@count 5 @cached 4")

    usage = chat.answers.last.locator(".usage")
    await expect(usage).to_have_text(re.compile(r"^\d+ tokens: \d+ in \(4 cached\), 5 out$"))
    live = await usage.text_content()
    await chat.page.reload()
    await expect(chat.answers.last.locator(".usage")).to_have_text(live or "")
    assert chat.problems == [], "\n".join(chat.problems)


async def test_a_reload_mid_answer_shows_the_answer_finish_exactly_once(chat: ChatPage) -> None:
    await chat.open()
    await chat.send("@count 30 @delay 100")
    await expect(chat.answer).to_contain_text("1 2 3")
    await chat.shot("before-reload")

    await chat.page.reload()

    await expect(chat.answer).to_contain_text("1 2 3")
    await chat.shot("after-reload")
    await expect(chat.answer).to_have_text(count_to(30))
    await expect(chat.answers).to_have_count(1)
    await chat.shot("finished")
    assert chat.problems == [], "\n".join(chat.problems)


async def test_stop_ends_the_turn_and_keeps_the_partial_answer(chat: ChatPage) -> None:
    await chat.open()
    await chat.send("@count 300 @delay 50")
    await expect(chat.answer).to_contain_text("1 2 3")

    await chat.button("Stop").click()

    await expect(chat.answers.last.locator(".status-aborted")).to_have_text("Stopped")
    await chat.shot("stopped")
    partial = await chat.answer.inner_text()
    assert count_to(300).startswith(partial) and len(partial) < len(count_to(300))
    await chat.page.wait_for_timeout(500)
    assert await chat.answer.inner_text() == partial
    answer = (await stored_messages(chat))[-1]
    assert answer["metadata"]["status"] == "aborted"  # type: ignore[index]
    await expect(chat.button("Send")).to_be_visible()
    assert chat.problems == [], "\n".join(chat.problems)


async def test_stopping_a_turn_that_waits_for_approval_denies_the_call(chat: ChatPage) -> None:
    await chat.open(agent="approvals")
    await chat.send('@tool delete_file {"path": "page-stopped.txt"}')
    await expect(chat.button("Approve")).to_be_visible()

    await chat.button("Stop").click()

    tool = chat.page.locator('[data-tool="delete_file"]')
    await expect(tool).to_have_attribute("data-state", "output-denied")
    await expect(chat.answers.last.locator(".status-aborted")).to_have_text("Stopped")
    await expect(chat.button("Send")).to_be_visible()
    await chat.shot("stopped")
    assert "delete_file:page-stopped.txt" not in tool_runs
    assert chat.problems == [], "\n".join(chat.problems)


async def test_an_approved_tool_call_runs_and_the_answer_goes_on(chat: ChatPage) -> None:
    await chat.open(agent="approvals")
    await chat.send('@tool delete_file {"path": "page-approved.txt"}')
    await expect(chat.button("Approve")).to_be_visible()
    await chat.shot("asked")

    await chat.button("Approve").click()

    await expect(chat.answer).to_have_text("Tool delete_file returned: deleted page-approved.txt")
    tool = chat.page.locator('[data-tool="delete_file"]')
    await expect(tool).to_have_attribute("data-state", "output-available")
    await expect(tool).to_contain_text("deleted page-approved.txt")
    await chat.shot("approved")
    assert "delete_file:page-approved.txt" in tool_runs
    assert chat.problems == [], "\n".join(chat.problems)


async def test_a_denied_tool_call_is_not_run_and_the_model_is_told_why(chat: ChatPage) -> None:
    await chat.open(agent="approvals")
    await chat.send('@tool delete_file {"path": "page-denied.txt"}')
    await chat.page.get_by_label("Reason (optional)").fill("keep it")

    await chat.button("Deny").click()

    await expect(chat.answer).to_contain_text("denied (keep it)")
    tool = chat.page.locator('[data-tool="delete_file"]')
    await expect(tool).to_have_attribute("data-state", "output-denied")
    await expect(tool).to_contain_text("Denied: keep it")
    await chat.shot("denied")
    assert "delete_file:page-denied.txt" not in tool_runs
    assert chat.problems == [], "\n".join(chat.problems)


async def test_a_client_tool_call_asks_for_its_output_in_a_form(chat: ChatPage) -> None:
    await chat.open(agent="approvals")
    await chat.send('@tool pick_color {"prompt": "your color?"}')
    tool = chat.page.locator('[data-tool="pick_color"]')
    await expect(tool).to_contain_text("your color?")
    await chat.page.get_by_label("Output of pick_color").fill("green")
    await chat.shot("asked")

    await tool.get_by_role("button", name="Send", exact=True).click()

    await expect(chat.answer).to_have_text("Tool pick_color returned: green")
    await expect(tool).to_have_attribute("data-state", "output-available")
    await chat.shot("answered")
    assert chat.problems == [], "\n".join(chat.problems)


async def test_an_mcp_servers_questions_are_answered_in_forms_round_after_round(
    chat: ChatPage,
) -> None:
    await chat.open(agent="mcp-input")
    await chat.send('@tool calc__sign_up {"plan": "pro"}')
    asked = chat.page.locator('.input-request[data-status="pending"]')
    await expect(asked).to_contain_text("What is your name?")
    await expect(chat.page.get_by_text("The answer waits for you above")).to_be_visible()
    await asked.get_by_label("name").fill("Ada")
    await chat.shot("asked")

    await asked.get_by_role("button", name="Accept").click()
    await expect(asked).to_contain_text("Sign Ada up for pro?")
    await asked.get_by_role("button", name="Decline").click()

    await expect(chat.answer).to_have_text(
        'Tool calc__sign_up returned: {"result":"not signed up: decline"}'
    )
    await expect(chat.page.locator('.input-request[data-status="answered"]')).to_have_count(2)
    await chat.shot("answered")
    assert chat.problems == [], "\n".join(chat.problems)


async def test_regenerate_makes_a_second_answer_and_each_can_be_switched_to(
    chat: ChatPage,
) -> None:
    await chat.open()
    await chat.send("@count 3")
    await expect(chat.answer).to_have_text(count_to(3))
    first = await chat.answers.last.get_attribute("data-message-id")

    await chat.button("Regenerate").click()

    await expect(chat.answers.last.locator(".branch-count")).to_have_text("2 / 2")
    second = await chat.answers.last.get_attribute("data-message-id")
    assert second != first
    await expect(chat.answer).to_have_text(count_to(3))
    await chat.shot("regenerated")

    await chat.page.get_by_label("Previous branch").click()

    await expect(chat.answers.last.locator(".branch-count")).to_have_text("1 / 2")
    await expect(chat.answers.last).to_have_attribute("data-message-id", first or "")
    await chat.shot("switched")
    await expect(chat.answers).to_have_count(1)
    assert [m["id"] for m in await stored_messages(chat)][-1] == first
    await chat.page.get_by_label("Next branch").click()
    await expect(chat.answers.last).to_have_attribute("data-message-id", second or "")
    assert chat.problems == [], "\n".join(chat.problems)


async def test_an_edit_is_answered_as_a_new_branch_beside_the_original(chat: ChatPage) -> None:
    await chat.open()
    await chat.send("@count 2 first")
    await expect(chat.answer).to_have_text(count_to(2))
    await chat.button("Edit").click()
    await chat.page.get_by_label("Edit message").fill("@count 4 second")

    await chat.button("Send edit").click()

    await expect(chat.answer).to_have_text(count_to(4))
    question = chat.page.locator('article[data-role="user"]')
    await expect(question).to_contain_text("@count 4 second")
    await expect(question.locator(".branch-count")).to_have_text("2 / 2")
    await chat.shot("edited")
    await chat.page.get_by_label("Previous branch").click()
    await expect(question).to_contain_text("@count 2 first")
    await expect(chat.answer).to_have_text(count_to(2))
    await chat.shot("switched-back")
    assert chat.problems == [], "\n".join(chat.problems)


async def test_an_answer_shows_its_reasoning_markdown_and_code_block(chat: ChatPage) -> None:
    await chat.open(agent="thinking")

    await chat.send("Show me a Fibonacci function @markdown")

    code = chat.answer.locator(".code")
    await expect(code.locator("code")).to_contain_text("def fibonacci(n: int) -> int:")
    await expect(code.locator(".code-head")).to_contain_text("python")
    await expect(chat.answer.locator("strong")).to_have_text("O(n)")
    await expect(chat.answer.locator("li")).to_have_count(2)
    reasoning = chat.answers.last.locator(".reasoning")
    await expect(reasoning).to_contain_text("Reasoning")
    await reasoning.locator("summary").click()
    await expect(reasoning).to_contain_text(THINKING)
    await chat.shot("rendered")
    if os.environ.get("PERDURE_README_SCREENSHOT"):
        README_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        await chat.page.screenshot(path=README_SCREENSHOT)
    assert chat.problems == [], "\n".join(chat.problems)


async def test_a_tool_call_shows_its_input_and_result(chat: ChatPage) -> None:
    await chat.open()

    await chat.send('@tool calculate {"expression": "12*7"}')

    tool = chat.page.locator('[data-tool="calculate"]')
    await expect(tool).to_have_attribute("data-state", "output-available")
    await expect(tool.locator(".tool-input")).to_contain_text('"expression": "12*7"')
    await expect(tool.locator(".tool-output")).to_have_text("84")
    await expect(chat.answer).to_have_text("Tool calculate returned: 84")
    await chat.shot("tool-result")
    assert chat.problems == [], "\n".join(chat.problems)


async def test_a_message_typed_while_the_answer_works_steers_it_where_it_joined(
    chat: ChatPage,
) -> None:
    await chat.open()
    await chat.send('@tool wait {"seconds": 3}')
    await expect(chat.page.locator('[data-tool="wait"]')).to_be_visible()

    await chat.page.get_by_label("Message").fill("@count 3 steered")
    await chat.button("Steer").click()

    joined = chat.answers.last.locator(".steer")
    await expect(joined).to_have_text("@count 3 steered")
    await expect(chat.answer).to_have_text(count_to(3))
    await expect(chat.page.locator("[data-steer-pending]")).to_have_count(0)
    await expect(chat.answers).to_have_count(1)
    await chat.shot("steered")
    assert chat.problems == [], "\n".join(chat.problems)


async def test_a_message_typed_during_the_last_text_is_answered_next_on_the_page(
    chat: ChatPage,
) -> None:
    await chat.open()
    await chat.send("@count 20 @delay 100")
    await expect(chat.answer).to_contain_text("1 2 3")

    await chat.page.get_by_label("Message").fill("@count 2 next")
    await chat.button("Steer").click()

    await expect(chat.answers).to_have_count(2)
    await expect(chat.answers.first.locator(".markdown")).to_have_text(count_to(20))
    await expect(chat.answer).to_have_text(count_to(2))
    users = chat.page.locator('article[data-role="user"]')
    await expect(users.last.locator(".plain")).to_have_text("@count 2 next")
    await expect(chat.button("Send")).to_be_visible()
    assert chat.problems == [], "\n".join(chat.problems)


async def test_a_recovering_turn_shows_the_recovery_notice_and_its_answer_once(
    chat: ChatPage,
) -> None:
    await chat.open()

    await chat.send(f"@count 20 @delay 50 @disconnect_after 5 {tag()}")

    await expect(chat.page.locator(".banner.recovery, .banner.recovered")).to_be_visible()
    await chat.shot("recovering")
    await expect(chat.answer).to_have_text(count_to(20))
    await expect(chat.page.locator(".banner.recovered")).to_contain_text("Recovered")
    await chat.shot("recovered")
    await expect(chat.answers).to_have_count(1)
    assert chat.problems == [], "\n".join(chat.problems)


async def test_a_failed_turn_shows_what_failed_in_words(chat: ChatPage) -> None:
    await chat.open()

    await chat.send(f"@fail 400 {tag()}")

    alert = chat.page.get_by_role("alert")
    await expect(alert).to_contain_text("HTTP 400")
    await expect(alert).to_contain_text("not retryable")
    await chat.shot("failed")
    assert "{" not in await alert.inner_text()


async def test_a_refused_request_shows_the_gateways_message_not_its_json(chat: ChatPage) -> None:
    async with httpx.AsyncClient(base_url=chat.stack.url) as http:
        refused = await http.get("/api/chat/not a chat id/messages")
    assert refused.status_code == 422

    await chat.page.goto(f"{chat.stack.url}/?chat=not%20a%20chat%20id")

    await expect(chat.page.locator(".banner.error")).to_have_text(
        refused.json()["error"]["message"]
    )
    await chat.shot("refused")


async def test_a_chat_is_renamed_and_deleted_from_the_list(chat: ChatPage) -> None:
    await chat.open()
    await chat.send("@count 1")
    await expect(chat.answer).to_have_text("1")
    item = chat.page.locator(f'li[data-session-id="{chat.chat_id}"]')

    await item.get_by_label("Rename").click()
    await chat.page.get_by_label("New title").fill("Renamed on the page")
    await chat.page.get_by_label("New title").press("Enter")

    await expect(item).to_contain_text("Renamed on the page")
    await expect(chat.page.locator("h1")).to_have_text("Renamed on the page")
    await chat.shot("renamed")
    async with httpx.AsyncClient(base_url=chat.stack.url) as http:
        stored = (await http.get(f"/v1/sessions/{chat.chat_id}")).json()
    assert stored["title"] == "Renamed on the page"

    await item.get_by_label("Delete").click()
    await item.get_by_role("button", name="Delete", exact=True).click()

    await expect(item).to_have_count(0)
    await chat.shot("deleted")
    await expect(chat.page).not_to_have_url(re.compile(re.escape(chat.chat_id)))
    async with httpx.AsyncClient(base_url=chat.stack.url) as http:
        assert (await http.get(f"/v1/sessions/{chat.chat_id}")).status_code == 404
    assert chat.problems == [], "\n".join(chat.problems)


async def test_an_answer_links_to_its_turn_in_the_temporal_ui(chat: ChatPage) -> None:
    await chat.open()
    await chat.send("@count 1")
    await expect(chat.answer).to_have_text("1")

    link = chat.answers.last.get_by_role("link", name="Temporal")

    await expect(link).to_have_attribute("href", re.compile(r"/namespaces/[^/]+/workflows/"))
    submission = (await stored_messages(chat))[-1]["metadata"]["submissionId"]  # type: ignore[index]
    async with httpx.AsyncClient(base_url=chat.stack.url) as http:
        described = (await http.get(f"/v1/sessions/{chat.chat_id}/submissions/{submission}")).json()
    assert await link.get_attribute("href") == described["temporalUrl"]


async def test_the_files_panel_shows_what_the_agent_wrote_and_its_call_opens_the_file(
    chat: ChatPage,
) -> None:
    await chat.open(agent="workspace")

    await chat.send('@tool write_file {"path": "notes/todo.md", "content": "- write the docs\\n"}')

    tool = chat.page.locator('[data-tool="write_file"]')
    await expect(tool).to_have_attribute("data-state", "output-available")
    await expect(tool.locator(".diff .add").first).to_contain_text("+- write the docs")
    await tool.get_by_role("button", name="Open notes/todo.md").click()
    panel = chat.page.get_by_role("complementary", name="Files")
    await expect(panel.get_by_role("button", name="todo.md")).to_be_visible()
    await expect(panel.locator(".file-content")).to_have_text("- write the docs\n")
    await chat.shot("files-panel")
    await panel.get_by_role("button", name="Close files").click()
    await expect(panel).to_have_count(0)
    assert chat.problems == [], "\n".join(chat.problems)


async def test_a_person_uploads_replaces_and_deletes_files_in_the_files_panel(
    chat: ChatPage, tmp_path: Path
) -> None:
    await chat.open(agent="workspace")
    await chat.send("@count 1")  # the chat exists once its first message is sent
    await expect(chat.answer).to_have_text("1")
    await chat.button("Files").click()
    panel = chat.page.get_by_role("complementary", name="Files")
    plan, logo = tmp_path / "plan.md", tmp_path / "logo.bin"
    plan.write_text("# plan\n")
    logo.write_bytes(bytes(range(256)))
    files = f"/v1/sessions/{chat.chat_id}/files"

    await panel.get_by_label("Upload files").set_input_files([str(plan), str(logo)])
    await expect(panel.get_by_role("button", name="logo.bin")).to_be_visible()
    await panel.get_by_role("button", name="plan.md").click()
    await expect(panel.locator(".file-content")).to_have_text("# plan\n")
    plan.write_text("# plan, second draft\n")
    await panel.get_by_label("Upload files").set_input_files(str(plan))
    await expect(panel.locator(".file-content")).to_have_text("# plan, second draft\n")
    await expect(panel.locator(".file-version")).to_have_text("v3")
    await panel.get_by_role("button", name="logo.bin").click()
    await expect(panel.get_by_text("Not text: 256 bytes, not shown.")).to_be_visible()
    await panel.get_by_role("button", name="Delete", exact=True).click()
    await panel.get_by_role("button", name="Yes, delete").click()

    await expect(panel.get_by_role("button", name="logo.bin")).to_have_count(0)
    await expect(panel.get_by_role("region")).to_have_count(0)  # nothing selected any more
    async with httpx.AsyncClient(base_url=chat.stack.url) as http:
        assert (await http.get(f"{files}/plan.md")).text == "# plan, second draft\n"
        assert (await http.get(f"{files}/logo.bin")).status_code == 404
    await chat.shot("files-panel-uploads")
    assert chat.problems == [], "\n".join(chat.problems)


async def test_an_upload_over_a_file_changed_since_it_was_shown_is_refused_and_says_why(
    chat: ChatPage, tmp_path: Path
) -> None:
    listings = files_requests_in_flight(chat.page)
    await chat.open(agent="workspace")
    await chat.send('@tool write_file {"path": "notes.md", "content": "from the agent\\n"}')
    tool = chat.page.locator('[data-tool="write_file"]')
    await expect(tool).to_have_attribute("data-state", "output-available")
    await chat.button("Files").click()
    panel = chat.page.get_by_role("complementary", name="Files")
    await panel.get_by_role("button", name="notes.md").click()
    # The page reads the files again when the turn ends: the change below must come after
    # its last read, or the page would show it and the upload would be over it.
    await expect(chat.button("Send")).to_be_visible()
    await expect(panel.get_by_role("heading", name="notes.md v1")).to_be_visible()
    await eventually(lambda: not listings, what="the page's reads of the files")
    async with httpx.AsyncClient(base_url=chat.stack.url) as http:
        await http.put(f"/v1/sessions/{chat.chat_id}/files/notes.md", content="meanwhile\n")
    mine = tmp_path / "notes.md"
    mine.write_text("from the page\n")

    await panel.get_by_label("Upload files").set_input_files(str(mine))

    await expect(panel.locator(".tool-error")).to_contain_text("another change came first")
    async with httpx.AsyncClient(base_url=chat.stack.url) as http:
        assert (await http.get(f"/v1/sessions/{chat.chat_id}/files/notes.md")).text == "meanwhile\n"
    assert chat.problems == [], "\n".join(chat.problems)


def files_requests_in_flight(page: Page) -> set[Request]:
    """The page's requests to a files API that have not been answered yet, kept up to date."""
    in_flight: set[Request] = set()

    def sent(request: Request) -> None:
        if "/files" in request.url:
            in_flight.add(request)

    def answered(request: Request) -> None:
        in_flight.discard(request)

    page.on("request", sent)
    page.on("requestfinished", answered)
    page.on("requestfailed", answered)
    return in_flight
