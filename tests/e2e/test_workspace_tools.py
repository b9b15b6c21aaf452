"""The built-in workspace tools (docs/workspace.md), called by the model through the fake
provider: files written, edited and searched across turns; a change only at the version the
turn saw; approvals on changes; what the tools refuse."""

import json
import uuid
from typing import Any

import httpx
import pytest

from perdure.testing.chat_client import Streamed, send
from tests.e2e.test_approvals import answer, request_of, resume_after


def new_session() -> str:
    return f"ws-{uuid.uuid4().hex[:12]}"


def call(name: str, **arguments: Any) -> str:
    return f"@tool {name} {json.dumps(arguments)}"


def outputs(*streams: Streamed) -> list[tuple[str, dict[str, Any]]]:
    """(tool name, the chunk that settled its call), in call order, over a turn's streams (a
    parked turn's call and its result come on two)."""
    chunks = [chunk for streamed in streams for chunk in streamed.chunks]
    names = {c["toolCallId"]: c["toolName"] for c in chunks if c["type"] == "tool-input-available"}
    return [
        (names[c["toolCallId"]], c)
        for c in chunks
        if c["type"] in ("tool-output-available", "tool-output-error")
    ]


def output(streamed: Streamed, name: str) -> Any:
    (settled,) = [chunk for tool, chunk in outputs(streamed) if tool == name]
    assert settled["type"] == "tool-output-available", settled
    return settled["output"]


def error(*streams: Streamed, name: str) -> str:
    (settled,) = [chunk for tool, chunk in outputs(*streams) if tool == name]
    assert settled["type"] == "tool-output-error", settled
    return str(settled["errorText"])


async def file_text(http: httpx.AsyncClient, session: str, path: str) -> str:
    return (await http.get(f"/v1/sessions/{session}/files/{path}")).text


async def test_an_agent_writes_edits_and_greps_its_files_across_turns(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    wrote = await send(
        http,
        session,
        call("write_file", path="notes.txt", content="alpha\nbeta\n"),
        agent="workspace",
    )
    edit = call("edit_file", path="notes.txt", old_text="beta", new_text="gamma")
    edited = await send(
        http, session, f"{call('read_file', path='notes.txt')}\n{edit}", agent="workspace"
    )
    found = await send(http, session, call("grep", pattern="gam+a"), agent="workspace")

    written = output(wrote, "write_file")
    assert (written["created"], written["version"]) == (True, 1)
    assert "+beta" in written["diff"]
    assert output(edited, "read_file")["content"] == "alpha\nbeta\n"
    change = output(edited, "edit_file")
    assert change["version"] == 2
    assert "-beta\n+gamma\n" in change["diff"]
    assert output(found, "grep") == {"matches": ["notes.txt:2: gamma"], "truncated": False}
    assert await file_text(http, session, "notes.txt") == "alpha\ngamma\n"


async def test_reading_some_lines_lists_and_finds_files(http: httpx.AsyncClient) -> None:
    session = new_session()
    await http.put(f"/v1/sessions/{session}/files/x", content="")  # no session yet: a 404
    await send(http, session, call("write_file", path="src/a.py", content="1\n2\n3\n4\n"),
               agent="workspace")  # fmt: skip
    await send(http, session, call("write_file", path="docs/b.md", content="b"), agent="workspace")
    turn = await send(
        http,
        session,
        "\n".join(
            [
                call("read_file", path="src/a.py", start_line=2, end_line=3),
                call("list_files", prefix="src/"),
                call("find_files", pattern="*.md"),
            ]
        ),
        agent="workspace",
    )

    read = output(turn, "read_file")
    assert (read["content"], read["totalLines"], read["startLine"]) == ("2\n3\n", 4, 2)
    assert [f["path"] for f in output(turn, "list_files")["files"]] == ["src/a.py"]
    assert output(turn, "find_files") == ["docs/b.md"]


async def test_reading_a_whole_file_gives_its_exact_text(http: httpx.AsyncClient) -> None:
    session = new_session()
    text = "alpha\r\nbeta\n\ngamma\n"
    await send(http, session, call("write_file", path="t.txt", content=text), agent="workspace")

    turn = await send(http, session, call("read_file", path="t.txt"), agent="workspace")

    read = output(turn, "read_file")
    assert (read["content"], read["totalLines"], read["endLine"]) == (text, 4, 4)


async def test_a_write_over_a_file_the_turn_never_read_is_refused(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    await send(
        http, session, call("write_file", path="keep.txt", content="first"), agent="workspace"
    )

    overwrite = await send(
        http, session, call("write_file", path="keep.txt", content="second"), agent="workspace"
    )

    assert "is at version 1, not absent" in error(overwrite, name="write_file")
    assert await file_text(http, session, "keep.txt") == "first"


async def test_an_edit_that_matches_twice_or_never_is_refused(http: httpx.AsyncClient) -> None:
    session = new_session()
    await send(http, session, call("write_file", path="t.txt", content="a a"), agent="workspace")
    read = call("read_file", path="t.txt")
    twice = await send(
        http,
        session,
        f"{read}\n{call('edit_file', path='t.txt', old_text='a', new_text='b')}",
        agent="workspace",
    )
    never = await send(
        http,
        session,
        f"{read}\n{call('edit_file', path='t.txt', old_text='z', new_text='b')}",
        agent="workspace",
    )

    assert "occurs 2 times" in error(twice, name="edit_file")
    assert "does not occur" in error(never, name="edit_file")
    assert await file_text(http, session, "t.txt") == "a a"


async def test_a_change_that_lost_a_race_to_another_is_a_conflict_not_an_overwrite(
    http: httpx.AsyncClient,
) -> None:
    """The turn reads the file, its edit waits for approval, a person changes the file
    meanwhile (the files API): the approved edit is told it lost, and the person's stays."""
    session = new_session()
    await send(http, session, "@count 1", agent="workspace-guarded")
    await http.put(f"/v1/sessions/{session}/files/race.txt", content="v1")
    turn = "\n".join(
        [
            call("read_file", path="race.txt"),
            call("edit_file", path="race.txt", old_text="v1", new_text="from the turn"),
        ]
    )
    waiting = await send(http, session, turn, agent="workspace-guarded")
    person = await http.put(f"/v1/sessions/{session}/files/race.txt", content="from a person")

    await answer(http, session, request_of(waiting)["approvalId"], approved=True)
    ended = await resume_after(http, session, waiting)

    assert person.status_code == 200
    assert "another change came first" in error(waiting, ended, name="edit_file")
    assert await file_text(http, session, "race.txt") == "from a person"


async def test_a_change_waits_for_approval_and_a_denied_one_changes_nothing(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    parked = await send(
        http, session, call("write_file", path="n.txt", content="x"), agent="workspace-guarded"
    )
    await answer(http, session, request_of(parked)["approvalId"], approved=False)
    ended = await resume_after(http, session, parked)

    assert parked.types()[-3:] == ["tool-approval-request", "finish-step", "finish"]
    assert any(c["type"] == "tool-output-denied" for c in ended.chunks)
    missing = await http.get(f"/v1/sessions/{session}/files/n.txt")
    assert missing.status_code == 404


# The name and the pattern are refused before the store is read; the runaway pattern costs its
# full 5 s of CPU, once is enough.
@pytest.mark.store_agnostic
async def test_a_name_outside_the_workspace_and_a_runaway_pattern_are_tool_errors(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    await send(http, session, call("write_file", path="s.txt", content="a" * 40 + "!"),
               agent="workspace")  # fmt: skip
    turn = await send(
        http,
        session,
        "\n".join(
            [
                call("read_file", path="../etc/passwd"),
                call("grep", pattern="(a+)+$"),
                call("grep", pattern="(unclosed"),
            ]
        ),
        agent="workspace",
    )

    errors = [str(c.get("errorText")) for _, c in outputs(turn)]
    assert "no empty, . or .. part" in errors[0]
    assert "took over 5 s" in errors[1]
    assert "does not compile" in errors[2]
