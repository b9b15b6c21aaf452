"""What a model step reads of a session: the newest summary on the active path and the
messages after what it covers (compactions are branch-local), read without walking the rest."""

from storage.compactions import save_compaction
from storage.db import Database
from storage.messages import recent_path_of
from tests.e2e.message_trees import chain, tree


async def recent(store: Database, session_id: str) -> tuple[str | None, list[str]]:
    summary, messages = await store.read_sync(
        lambda session: recent_path_of(session, session_id=session_id)
    )
    return summary, [message.id for message in messages]


async def summarize(store: Database, session_id: str, up_to: str, summary: str) -> None:
    await save_compaction(
        store,
        session_id=session_id,
        up_to_message_id=up_to,
        summary=summary,
        tokens_before=100,
        tokens_after=10,
    )


async def test_without_a_summary_the_whole_path_is_read(store: Database) -> None:
    session_id = await tree(store, chain(4), leaf="m3")

    assert await recent(store, session_id) == (None, ["m0", "m1", "m2", "m3"])


async def test_the_newest_summary_on_the_path_applies_to_what_follows_it(store: Database) -> None:
    session_id = await tree(store, chain(5), leaf="m4")
    await summarize(store, session_id, "m1", "early")
    await summarize(store, session_id, "m3", "later")

    assert await recent(store, session_id) == ("later", ["m4"])


async def test_a_summary_of_another_branch_does_not_apply(store: Database) -> None:
    session_id = await tree(store, [*chain(3), ("x1", "m0")], leaf="m2")
    await summarize(store, session_id, "x1", "the other branch")

    assert await recent(store, session_id) == (None, ["m0", "m1", "m2"])


async def test_a_summary_of_the_shared_part_applies_on_every_branch(store: Database) -> None:
    session_id = await tree(store, [*chain(3), ("x2", "m1")], leaf="x2")
    await summarize(store, session_id, "m0", "shared")

    assert await recent(store, session_id) == ("shared", ["m1", "x2"])


async def test_of_two_summaries_up_to_the_same_message_the_newer_applies(
    store: Database,
) -> None:
    session_id = await tree(store, chain(3), leaf="m2")
    await summarize(store, session_id, "m1", "first")
    await summarize(store, session_id, "m1", "second")

    assert await recent(store, session_id) == ("second", ["m2"])
