"""The chat page against a gateway that needs an API key: it asks for one, keeps it in the
browser, sends it with every request (REST and the AI SDK's stream alike), says when it is
refused, and forgets it when asked."""

from collections.abc import AsyncIterator

import httpx
import pytest
from playwright.async_api import expect

from perdure.testing.stack import Stack, delete_stored_keys
from storage.api_keys import create_key
from tests.browser.conftest import ChatPage
from tests.fakeprovider_fixtures import count_to

pytestmark = pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
TENANT = "page-tenant"


@pytest.fixture
async def key(stack: Stack) -> AsyncIterator[str]:
    """A key of TENANT in the store, which closes the gateway to callers without one."""
    created = await create_key(stack.services.db, tenant_id=TENANT, name="browser test")
    try:
        yield created.key
    finally:
        await delete_stored_keys(stack)


async def _enter(chat: ChatPage, key: str) -> None:
    await expect(
        chat.page.get_by_role("heading", name="This gateway needs an API key")
    ).to_be_visible()
    await chat.page.get_by_role("textbox", name="API key").fill(key)
    await chat.button("Use key").click()


async def test_the_page_asks_for_the_key_and_chats_with_it_as_its_tenant(
    chat: ChatPage, key: str
) -> None:
    await chat.open()
    await chat.shot("asked")

    await _enter(chat, key)
    await chat.send("@count 5")

    await expect(chat.answer).to_have_text(count_to(5))
    await chat.page.reload()  # the key is kept: the history loads and the stream resumes
    await expect(chat.answer).to_have_text(count_to(5))
    await chat.shot("answered")
    async with httpx.AsyncClient(base_url=chat.stack.url) as http:
        mine = await http.get(
            f"/api/chat/{chat.chat_id}/messages", headers={"Authorization": f"Bearer {key}"}
        )
        anonymous = await http.get(f"/api/chat/{chat.chat_id}/messages")
    assert [m["role"] for m in mine.json()] == ["user", "assistant"]
    assert anonymous.status_code == 401
    assert chat.problems == [], "\n".join(chat.problems)


async def test_a_refused_key_is_said_so_and_another_can_be_entered(
    chat: ChatPage, key: str
) -> None:
    await chat.open()
    await _enter(chat, "pk_not-a-key")

    await expect(chat.page.get_by_role("alert")).to_contain_text("refused the key")
    await chat.shot("refused")
    await _enter(chat, key)
    await expect(chat.page.get_by_role("button", name="+ New chat")).to_be_visible()
    assert chat.problems == [], "\n".join(chat.problems)


async def test_forgetting_the_key_asks_for_it_again(chat: ChatPage, key: str) -> None:
    await chat.open()
    await _enter(chat, key)

    await chat.button("Forget API key").click()

    await expect(
        chat.page.get_by_role("heading", name="This gateway needs an API key")
    ).to_be_visible()
    await expect(chat.page.get_by_role("alert")).to_have_count(0)
    assert chat.problems == [], "\n".join(chat.problems)
