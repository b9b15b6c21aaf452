"""The chat page in a real browser: Debian's chromium (never a downloaded one) driven by
Playwright, against a real stack (perdure/testing/stack.py) that serves the page at `/`.

`PERDURE_SCREENSHOTS=DIR` writes a screenshot of each state a test reaches into DIR;
`PERDURE_README_SCREENSHOT=1` rewrites docs/images/chat-page.png."""

import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.async_api import (
    Browser,
    ConsoleMessage,
    Locator,
    Page,
    Response,
    async_playwright,
)

from perdure.testing.stack import Stack
from tests.databases import skip_or_fail

CHROMIUM = Path("/usr/bin/chromium")
README_SCREENSHOT = Path(__file__).parents[2] / "docs" / "images" / "chat-page.png"


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    if not CHROMIUM.exists():
        skip_or_fail(
            f"chromium is not installed at {CHROMIUM}: `make test` installs it "
            "(apt-get install chromium, as root)"
        )
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield launched
        await launched.close()


@dataclass
class ChatPage:
    """The page of one chat, with what a person does on it."""

    page: Page
    stack: Stack
    test_name: str
    chat_id: str = ""
    problems: list[str] = field(default_factory=list)
    """Script errors, console errors and 5xx answers the page met: none is expected."""

    async def open(self, agent: str | None = None) -> None:
        """A new chat, as a person opens one: the page picks its id and puts it in the
        address (`?agent=` picks the agent)."""
        await self.page.goto(f"{self.stack.url}/" + (f"?agent={agent}" if agent else ""))
        await self.page.wait_for_url(re.compile(r"[?&]chat="))
        self.chat_id = parse_qs(urlparse(self.page.url).query)["chat"][0]

    async def send(self, text: str) -> None:
        await self.page.get_by_label("Message").fill(text)
        await self.page.get_by_role("button", name="Send", exact=True).click()

    @property
    def answers(self) -> Locator:
        return self.page.locator('article[data-role="assistant"]')

    @property
    def answer(self) -> Locator:
        """The text of the last answer."""
        return self.answers.last.locator(".markdown")

    def button(self, name: str) -> Locator:
        return self.page.get_by_role("button", name=name, exact=True)

    async def shot(self, state: str) -> None:
        """A screenshot of this state, when PERDURE_SCREENSHOTS names a directory."""
        directory = os.environ.get("PERDURE_SCREENSHOTS")
        if directory:
            Path(directory).mkdir(parents=True, exist_ok=True)
            await self.page.screenshot(path=Path(directory) / f"{self.test_name}-{state}.png")


def _test_name(request: pytest.FixtureRequest) -> str:
    return re.sub(r"\W+", "-", request.node.name).strip("-")


@pytest.fixture
async def chat(
    browser: Browser, stack: Stack, request: pytest.FixtureRequest
) -> AsyncIterator[ChatPage]:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    page = await context.new_page()
    page.set_default_timeout(15_000)
    opened = ChatPage(page=page, stack=stack, test_name=_test_name(request))

    def console(message: ConsoleMessage) -> None:
        # A 4xx the page handles (an unknown chat's history) is still logged by the browser.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            opened.problems.append(f"console: {message.text}")

    def response(answer: Response) -> None:
        if answer.status >= 500:
            opened.problems.append(f"HTTP {answer.status}: {answer.request.method} {answer.url}")

    page.on("console", console)
    page.on("response", response)
    page.on("pageerror", lambda error: opened.problems.append(f"page error: {error}"))
    try:
        yield opened
    finally:
        await context.close()
