"""A session's workspace over HTTP (docs/workspace.md): files written, read, listed and
deleted from outside; versions as ETags; names that are no file of a workspace, sizes past its
bounds, and other tenants refused; a fork starts from a copy."""

import uuid

import httpx
import pytest

from perdure.runtime.settings import ApiKeys
from perdure.testing.chat_client import send
from perdure.testing.stack import Stack
from tests.e2e.conftest import Gateway, unique


async def new_chat(http: httpx.AsyncClient) -> str:
    """A session exists once its first message is answered."""
    chat = f"files-{uuid.uuid4().hex[:12]}"
    await send(http, chat, "@count 1")
    return chat


def files_of(http: httpx.AsyncClient, chat: str) -> str:
    return f"/v1/sessions/{chat}/files"


async def test_a_file_written_is_read_listed_and_deleted(http: httpx.AsyncClient) -> None:
    chat = await new_chat(http)
    files = files_of(http, chat)

    written = await http.put(f"{files}/notes/plan.md", content="# Plan\n1. write\n")
    read = await http.get(f"{files}/notes/plan.md")
    listed = (await http.get(files)).json()
    deleted = await http.delete(f"{files}/notes/plan.md")
    gone = await http.get(f"{files}/notes/plan.md")

    assert written.status_code == 201, written.text
    assert written.json() == {"path": "notes/plan.md", "size": 16, "version": 1, "created": True}
    assert read.text == "# Plan\n1. write\n"
    assert read.headers["content-type"] == "text/plain; charset=utf-8"
    assert read.headers["etag"] == '"1"'
    assert [f["path"] for f in listed["files"]] == ["notes/plan.md"]
    assert (listed["version"], listed["totalBytes"]) == (1, 16)
    assert deleted.status_code == 204
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "file_not_found"
    assert (await http.get(files)).json() == {"version": 2, "totalBytes": 0, "files": []}


async def test_bytes_that_are_not_text_come_back_as_they_went_in(http: httpx.AsyncClient) -> None:
    chat = await new_chat(http)
    blob = bytes(range(256))

    await http.put(f"{files_of(http, chat)}/image.bin", content=blob)
    read = await http.get(f"{files_of(http, chat)}/image.bin")

    assert read.content == blob
    assert read.headers["content-type"] == "application/octet-stream"


async def test_a_change_conditional_on_a_version_another_change_passed_is_refused(
    http: httpx.AsyncClient,
) -> None:
    chat = await new_chat(http)
    path = f"{files_of(http, chat)}/shared.txt"
    first = await http.put(path, content="one")
    await http.put(path, content="two", headers={"If-Match": first.headers["etag"]})

    stale_write = await http.put(path, content="three", headers={"If-Match": '"1"'})
    stale_delete = await http.delete(path, headers={"If-Match": '"1"'})
    create_only = await http.put(path, content="new", headers={"If-None-Match": "*"})

    for refused in (stale_write, stale_delete, create_only):
        assert refused.status_code == 412, refused.text
        assert refused.json()["error"]["code"] == "version_conflict"
    assert (await http.get(path)).text == "two"


@pytest.mark.parametrize(
    "name",
    [
        "%2E%2E/escape.txt",
        "a/%2E%2E/b.txt",
        "a//b.txt",
        "/etc/passwd",
        "nul%00.txt",
        "back%5Cslash",
        "line%0Abreak.txt",
        "ends-in-a-line-break.txt%0A",
        "a" * 513,
        "b" * 5_000,
        "é" * 257,  # 257 characters, 514 bytes
    ],
)
async def test_a_name_that_is_no_file_of_the_workspace_is_refused(
    http: httpx.AsyncClient, name: str
) -> None:
    chat = await new_chat(http)
    await http.put(f"/v1/sessions/{chat}/files/ends-in-a-line-break.txt", content="kept")
    url = f"/v1/sessions/{chat}/files/{name}"

    answers = [await http.put(url, content="x"), await http.get(url), await http.delete(url)]

    assert [answer.status_code for answer in answers] == [422] * 3, answers[0].text
    assert [answer.json()["error"]["code"] for answer in answers] == ["bad_path"] * 3
    assert (await http.get(f"/v1/sessions/{chat}/files/ends-in-a-line-break.txt")).text == "kept"
    listed = (await http.get(files_of(http, chat))).json()["files"]
    assert [file["path"] for file in listed] == ["ends-in-a-line-break.txt"]


async def test_the_workspaces_bounds_refuse_a_write_and_leave_it_as_it_was(
    stack: Stack, gateway: Gateway
) -> None:
    tenant = unique("bounded")
    keys = ApiKeys.parse(f"bounded-key:{tenant}")
    limits = {"workspace_max_file_bytes": 10, "workspace_max_bytes": 15, "workspace_max_files": 2}
    async with gateway("bounded-key", api_keys=keys, **limits) as client:
        chat = await new_chat(client)
        files = files_of(client, chat)
        await client.put(f"{files}/a.txt", content="12345678")
        too_large = await client.put(f"{files}/big.txt", content="x" * 11)
        over_total = await client.put(f"{files}/b.txt", content="1234567890")
        await client.put(f"{files}/c.txt", content="1")
        too_many = await client.put(f"{files}/d.txt", content="1")
        listing = (await client.get(files)).json()

    assert too_large.status_code == 413 and too_large.json()["error"]["code"] in (
        "file_too_large",
        "body_too_large",
    )
    assert over_total.status_code == 413
    assert over_total.json()["error"]["code"] == "workspace_full"
    assert too_many.status_code == 413
    assert too_many.json()["error"]["code"] == "workspace_full"
    assert [f["path"] for f in listing["files"]] == ["a.txt", "c.txt"]
    assert listing["totalBytes"] == 9


async def test_another_tenants_workspace_cannot_be_read_or_changed(
    tenants: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    alpha, beta = tenants
    chat = await new_chat(alpha)
    await alpha.put(f"{files_of(alpha, chat)}/secret.txt", content="alpha's")

    read = await beta.get(f"{files_of(beta, chat)}/secret.txt")
    written = await beta.put(f"{files_of(beta, chat)}/secret.txt", content="beta's")
    listed = await beta.get(files_of(beta, chat))

    assert {read.status_code, written.status_code, listed.status_code} == {404}
    assert (await alpha.get(f"{files_of(alpha, chat)}/secret.txt")).text == "alpha's"


async def test_a_fork_starts_from_a_copy_of_the_workspace(http: httpx.AsyncClient) -> None:
    chat = await new_chat(http)
    await http.put(f"{files_of(http, chat)}/draft.txt", content="v1")
    leaf = (await http.get(f"/api/chat/{chat}/messages")).json()[-1]["id"]

    forked = await http.post(f"/v1/sessions/{chat}/fork", json={"messageId": leaf})
    fork = forked.json()["id"]
    await http.put(f"{files_of(http, fork)}/draft.txt", content="v2 in the fork")

    assert forked.status_code == 201, forked.text
    assert (await http.get(f"{files_of(http, fork)}/draft.txt")).text == "v2 in the fork"
    assert (await http.get(f"{files_of(http, chat)}/draft.txt")).text == "v1"
