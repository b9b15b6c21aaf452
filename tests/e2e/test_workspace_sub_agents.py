"""Sub-agents work in the workspace of the chat that called them (docs/workspace.md), as
Think's share their parent's: what one writes, the chat and its other sub-agents read. Two
sub-agents racing on one file end with one change and one conflict, never an overwrite."""

import asyncio
import json
from typing import Any

import httpx

from perdure.testing.chat_client import send
from tests.e2e.test_workspace_tools import call, file_text, new_session, output

LEAD = "workspace-lead"


def delegate(sub_agent: str, *steps: str) -> str:
    return f"@tool {sub_agent} {json.dumps({'task': chr(10).join(steps)})}"


def edit_to(text: str) -> str:
    return "\n".join(
        [
            call("read_file", path="shared.txt"),
            call("edit_file", path="shared.txt", old_text="count: 1", new_text=text),
        ]
    )


async def children_waiting(http: httpx.AsyncClient, session: str, count: int) -> list[str]:
    """The session's sub-agent sessions, oldest first, once `count` of them wait."""
    async with asyncio.timeout(60):
        while True:
            response = await http.get(f"/v1/sessions/{session}/children")
            children = response.json() if response.status_code == 200 else []
            if len([c for c in children if c["status"] == "waiting"]) == count:
                return [child["id"] for child in children]
            await asyncio.sleep(0.1)


async def approve_the_one_approval(http: httpx.AsyncClient, child: str) -> None:
    (approval,) = (await http.get(f"/v1/sessions/{child}/approvals")).json()
    answered = await http.post(
        f"/v1/sessions/{child}/approvals/{approval['approvalId']}", json={"approved": True}
    )
    assert answered.status_code == 200, answered.text


async def idle(http: httpx.AsyncClient, session: str) -> None:
    async with asyncio.timeout(60):
        while (await http.get(f"/v1/sessions/{session}")).json()["status"] != "idle":
            await asyncio.sleep(0.1)


async def helper_wrote(http: httpx.AsyncClient, path: str, content: str) -> tuple[str, str]:
    """A new chat whose `helper` sub-agent wrote `path`: (the chat, the sub-agent's session)."""
    session = new_session()
    await send(
        http,
        session,
        delegate("helper", call("write_file", path=path, content=content)),
        agent=LEAD,
    )
    (child,) = (await http.get(f"/v1/sessions/{session}/children")).json()
    return session, child["id"]


def edit_part(messages: list[dict[str, Any]]) -> dict[str, Any]:
    (part,) = [p for p in messages[-1]["parts"] if p["type"] == "tool-edit_file"]
    return part


async def test_a_sub_agent_works_in_the_workspace_of_the_chat_that_called_it(
    http: httpx.AsyncClient,
) -> None:
    session, child = await helper_wrote(http, "report.md", "found it")

    read_back = await send(http, session, call("read_file", path="report.md"), agent=LEAD)
    listed = (await http.get(f"/v1/sessions/{session}/files")).json()

    assert output(read_back, "read_file")["content"] == "found it"
    assert [f["path"] for f in listed["files"]] == ["report.md"]
    assert (await http.get(f"/v1/sessions/{child}/files")).json() == listed
    assert await file_text(http, child, "report.md") == "found it"


async def test_two_sub_agents_racing_on_one_file_end_with_one_change_and_one_conflict(
    http: httpx.AsyncClient,
) -> None:
    """Both read version 1, both edits wait for approval; the one approved first applies,
    the other is told another change came first and changes nothing."""
    session = new_session()
    await send(http, session, "@count 1", agent=LEAD)
    await http.put(f"/v1/sessions/{session}/files/shared.txt", content="count: 1\n")
    racing = asyncio.create_task(
        send(
            http,
            session,
            "\n".join(
                [
                    "@parallel",
                    delegate("editor", edit_to("count: 2")),
                    delegate("editor", edit_to("count: 3")),
                ]
            ),
            agent=LEAD,
        )
    )
    first, second = await children_waiting(http, session, count=2)

    await approve_the_one_approval(http, first)
    await idle(http, first)
    await approve_the_one_approval(http, second)
    await racing
    await idle(http, session)

    won = edit_part((await http.get(f"/api/chat/{first}/messages")).json())
    lost = edit_part((await http.get(f"/api/chat/{second}/messages")).json())
    assert won["state"] == "output-available"
    assert won["output"]["version"] == 2
    assert lost["state"] == "output-error"
    assert "another change came first" in lost["errorText"]
    winner = won["input"]["new_text"]
    assert await file_text(http, session, "shared.txt") == f"{winner}\n"
    assert (await http.get(f"/v1/sessions/{session}/files")).json()["version"] == 2


async def test_a_fork_of_a_sub_agent_session_starts_from_the_chat_workspace(
    http: httpx.AsyncClient,
) -> None:
    _, child = await helper_wrote(http, "notes.txt", "shared")
    leaf = (await http.get(f"/api/chat/{child}/messages")).json()[-1]["id"]

    forked = await http.post(f"/v1/sessions/{child}/fork", json={"messageId": leaf})

    assert forked.status_code == 201, forked.text
    assert await file_text(http, forked.json()["id"], "notes.txt") == "shared"
