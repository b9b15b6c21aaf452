"""A workspace change is made once per tool call, however often the call runs: a worker that
died after the change committed, before the call's result was logged, has its call run again
by the retry, which answers the same and changes nothing (storage/workspaces.py)."""

from activities.workspace_tools import WorkspaceTools
from perdure.domain.workspace_rules import WorkspaceLimits
from perdure.tools import ToolContext
from storage.db import Database
from storage.workspaces import list_files

LIMITS = WorkspaceLimits(max_file_bytes=1000, max_total_bytes=10_000, max_files=10)


def context(call: str, submission: str = "sub-1") -> ToolContext:
    return ToolContext(
        tenant_id="t", session_id="s", submission_id=submission, tool_call_id=call, agent="a"
    )


async def test_a_write_run_again_for_the_same_call_changes_nothing_and_answers_the_same(
    store: Database,
) -> None:
    tools = WorkspaceTools(db=store, limits=LIMITS).for_agent(_Agent())
    write = tools["write_file"]

    first = await write.invoke(None, {"path": "a.txt", "content": "once"}, context("call-1"))
    again = await write.invoke(None, {"path": "a.txt", "content": "once"}, context("call-1"))

    listing = await list_files(store, session_id="s")
    assert again == first
    assert (listing.version, [f.version for f in listing.files]) == (1, [1])


async def test_an_edit_run_again_for_the_same_call_applies_once(store: Database) -> None:
    tools = WorkspaceTools(db=store, limits=LIMITS).for_agent(_Agent())
    await tools["write_file"].invoke(None, {"path": "n.txt", "content": "x"}, context("w"))
    edit = {"path": "n.txt", "old_text": "x", "new_text": "xx"}

    first = await tools["edit_file"].invoke(None, edit, context("e"))
    again = await tools["edit_file"].invoke(None, edit, context("e"))

    assert again == first
    row = (await list_files(store, session_id="s")).files[0]
    assert (row.size, row.version) == (2, 2)  # "xx": one edit, not "xxx"


class _Agent:
    name = "a"
    workspace_tools = True
    workspace_approval = False
