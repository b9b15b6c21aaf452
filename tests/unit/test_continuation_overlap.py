"""Trimming what a model repeats of the partial answer it was asked to continue."""

import pytest

from perdure.domain.overlap import OverlapTrimmer, overlap_length, trim_overlap

PARTIAL = "1 2 3 4 5 6 7 8 9 1"


@pytest.mark.parametrize(
    ("continuation", "kept"),
    [
        ("9 10 11", "0 11"),  # the last words repeated, the word in progress restarted
        (" 9 10 11", "0 11"),  # with the space before them
        ("1 2 3 4 5 6 7 8 9 10 11", "0 11"),  # answered afresh, from the start
        ("0 11", "0 11"),  # a clean continuation is kept whole
    ],
)
def test_the_longest_repeat_of_the_partials_end_is_cut(continuation: str, kept: str) -> None:
    assert trim_overlap(PARTIAL, continuation) == kept


def test_an_overlap_must_start_at_a_word_boundary_of_the_partial() -> None:
    assert trim_overlap("I like ban", "anas") == "anas"


def test_a_one_letter_overlap_is_taken_for_a_genuine_continuation() -> None:
    assert trim_overlap("1 2 3 4 5 6 7 8 9 10 1", "1 12") == "1 12"


def test_a_short_partial_repeated_whole_is_cut() -> None:
    assert trim_overlap("1", "1 2 3") == " 2 3"


def test_trailing_whitespace_is_not_doubled() -> None:
    assert trim_overlap("1 2 3 ", " 4 5") == "4 5"
    assert trim_overlap("Title\n", "\nBody") == "Body"


def test_whitespace_and_case_must_match_exactly() -> None:
    assert overlap_length("Hello world", "hello world!") == 0
    assert overlap_length("Hello world", "Hello  world!") == 0


def test_streamed_deltas_are_held_only_while_a_longer_repeat_is_possible() -> None:
    trim = OverlapTrimmer(PARTIAL)
    assert [trim(d) for d in ["9", " 1", "0", " 11"]] == ["", "", "0", " 11"]
    assert trim.flush() == ""


def test_a_continuation_unlike_the_partial_passes_at_once() -> None:
    trim = OverlapTrimmer(PARTIAL)
    assert trim("0") == "0"
    assert not trim.holding


def test_what_is_held_when_the_stream_ends_is_decided_by_flush() -> None:
    trim = OverlapTrimmer(PARTIAL)
    assert trim("8 9") == ""  # could still become "8 9 1", a repeat of the partial's end
    assert trim.holding
    assert trim.flush() == "8 9"  # it did not: kept


def test_a_repeat_split_across_deltas_is_cut_whole() -> None:
    trim = OverlapTrimmer(PARTIAL)
    assert [trim(d) for d in ["8", " 9", " 1", "0"]] == ["", "", "", "0"]


def test_without_a_partial_nothing_is_trimmed() -> None:
    trim = OverlapTrimmer("")
    assert trim("1 2") == "1 2"
