"""The real AI SDK client (`ai` 6.x in Node) against a running gateway: tests/node/."""

import asyncio
import shutil
from pathlib import Path

import pytest

from perdure.testing.stack import Stack
from tests.databases import skip_or_fail

NODE_TESTS = Path(__file__).parents[1] / "node"


def _node_ready() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (NODE_TESTS / "node_modules" / "ai").exists():
        return "the ai package is not installed: run `make test` (npm ci in tests/node)"
    return None


@pytest.mark.long
@pytest.mark.node
@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
async def test_the_ai_sdk_chat_client_sends_resumes_stops_and_answers_parked_turns(
    stack: Stack,
) -> None:
    missing = _node_ready()
    if missing is not None:
        skip_or_fail(missing)
    process = await asyncio.create_subprocess_exec(
        "node",
        "--test",
        "--test-reporter=spec",
        cwd=NODE_TESTS,
        env={"PERDURE_URL": stack.url, "PATH": shutil.which("node").rsplit("/", 1)[0]},  # type: ignore[union-attr]
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=180)
    report = output.decode(errors="replace")
    assert process.returncode == 0, report
    assert "ℹ fail 0" in report, report
    assert "ℹ skipped 0" in report, report
    assert "ℹ pass 11" in report, report
