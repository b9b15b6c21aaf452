"""`bench.compare` in a tiny mode: every system it sets beside Perdure (the session entity
workflow, Workflow Streams, the direct floor) and Perdure itself answer with the fake provider's
exact text, one turn after another, through a turn of tool rounds and several sessions at once.
No timing is asserted: this shows the alternatives work, so that the benchmark compares working
designs."""

import pytest

from bench.compare import SYSTEMS, Options, run


@pytest.mark.long
@pytest.mark.timeout(150)
async def test_every_system_answers_exactly() -> None:
    options = Options(
        warm_up=0,
        turns=2,
        turns_per_chat=2,
        tool_turns=1,
        tool_calls=3,
        sessions=[3],
        kill=False,
        timeout=60,
        fresh_per_level=False,
    )
    results = await run(options)
    assert [result.name for result in results] == SYSTEMS
    for result in results:
        assert result.error is None, f"{result.name}: {result.error}"
        assert (result.latency.exact, result.latency.turns) == (2, 2), result.name
        tools = result.tools
        assert (tools.exact, tools.turns) == (1, 1), f"{result.name}: {dict(tools.problems)}"
        assert len(tools.rounds) == 3, result.name
        (load,) = result.loads
        assert (load.exact, load.errors) == (3, 0), f"{result.name}: {dict(load.problems)}"
        if result.name == "direct":
            assert result.latency.history_bytes is None
        else:
            assert result.latency.history_bytes, f"{result.name}: no Temporal history read"
