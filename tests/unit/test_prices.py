"""The price table (PERDURE_PRICES): what tokens cost, and a bad file refused at start."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from perdure.domain.prices import PriceTable
from perdure.domain.usage import Usage
from perdure.runtime.settings import Settings


def test_cached_input_is_billed_at_its_own_price_and_reasoning_as_output() -> None:
    table = PriceTable.model_validate(
        {"openai:m": {"input": 2.0, "cached_input": 0.5, "output": 8.0}}
    )
    usage = Usage(input=1_000_000, cached_input=400_000, output=100_000, reasoning=60_000)

    assert table.cost("openai:m", usage) == pytest.approx(0.6 * 2.0 + 0.4 * 0.5 + 0.1 * 8.0)


def test_cached_input_without_a_price_of_its_own_costs_as_input() -> None:
    table = PriceTable.model_validate({"openai:m": {"input": 2.0, "output": 8.0}})

    assert table.cost("openai:m", Usage(input=10, cached_input=10)) == pytest.approx(20 / 1e6)


def test_a_model_without_a_price_has_no_cost() -> None:
    assert PriceTable.model_validate({}).cost("anthropic:x", Usage(input=5)) is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not JSON"),
        (json.dumps({"openai:m": {"input": -1, "output": 1}}), "openai:m.input"),
        (json.dumps({"openai:m": {"input": 1, "output": 1, "per": "token"}}), "openai:m.per"),
        (json.dumps({"openai:m": {"input": 1}}), "openai:m.output: Field required"),
    ],
)
def test_a_bad_price_file_stops_the_settings_with_what_is_wrong(
    tmp_path: Path, content: str, message: str
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(content)

    with pytest.raises(ValidationError, match=message):
        Settings.model_validate({"PERDURE_PRICES": str(prices)})


def test_a_missing_price_file_is_named() -> None:
    with pytest.raises(ValidationError, match="cannot read the price table /nowhere.json"):
        Settings.model_validate({"PERDURE_PRICES": "/nowhere.json"})
