"""An optional price table: what a model's tokens cost, in US dollars per million (pure).

`PERDURE_PRICES` names a JSON file of the form
`{"openai:gpt-4.1-mini": {"input": 0.40, "cached_input": 0.10, "output": 1.60}}`, keyed by
model spec as agents name them. Perdure ships no prices: providers change them, and only the
deployment knows its contract. Reasoning tokens are output tokens (every provider bills them
so); cached input is billed at `cached_input` (default: `input`)."""

from pydantic import BaseModel, ConfigDict, Field, RootModel

from perdure.domain.usage import Usage


class ModelPrice(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, allow_inf_nan=False)
    cached_input: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    output: float = Field(ge=0, allow_inf_nan=False)

    def cost(self, usage: Usage) -> float:
        cached = self.input if self.cached_input is None else self.cached_input
        uncached = max(usage.input - usage.cached_input, 0)
        return (
            uncached * self.input + usage.cached_input * cached + usage.output * self.output
        ) / 1e6


class PriceTable(RootModel[dict[str, ModelPrice]]):
    def cost(self, model: str, usage: Usage) -> float | None:
        """In US dollars; None for a model the table does not price."""
        price = self.root.get(model)
        return None if price is None else price.cost(usage)
