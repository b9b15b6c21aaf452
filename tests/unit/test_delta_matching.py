"""The benchmarks match provider deltas to received events by position in the text."""

import pytest

from bench.delta_matching import covering_events


def test_a_joined_event_covers_every_delta_it_carries() -> None:
    assert covering_events(["1", " 2 3", " 4"], ["1", " 2", " 3", " 4"]) == [0, 1, 1, 2]


def test_a_delta_split_over_two_events_arrived_with_the_second() -> None:
    assert covering_events([" 1", "2", " 13"], [" 12", " 13"]) == [1, 2]


def test_texts_that_differ_are_refused() -> None:
    with pytest.raises(ValueError, match="do not spell"):
        covering_events(["1 2"], ["1", " 3"])
