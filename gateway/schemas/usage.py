"""`GET /v1/usage`: what a tenant's model calls consumed, summed by session, agent, model or
day over a time range."""

from datetime import datetime

from pydantic import BaseModel, Field

from perdure.domain.usage import Usage


class UsageTotals(BaseModel):
    inputTokens: int = Field(  # noqa: N815 - wire names, as the AI SDK spells usage
        description="Every input token the models read, cached ones included."
    )
    cachedInputTokens: int = Field(  # noqa: N815
        description="Of the input tokens, those read from the provider's prompt cache."
    )
    outputTokens: int = Field(  # noqa: N815
        description="Every token the models wrote, reasoning included."
    )
    reasoningTokens: int = Field(  # noqa: N815
        description="Of the output tokens, those spent reasoning (where the provider says)."
    )
    totalTokens: int = Field(description="Input and output: what budgets count.")  # noqa: N815
    modelCalls: int = Field(  # noqa: N815
        description="Model calls that reported usage, each recovery attempt counted."
    )
    costUsd: float | None = Field(  # noqa: N815
        description="What the tokens cost by the deployment's price table (PERDURE_PRICES); "
        "null without one, or when a model in the group has no price."
    )

    @classmethod
    def of(cls, usage: Usage, calls: int, cost: float | None) -> "UsageTotals":
        return cls(
            inputTokens=usage.input,
            cachedInputTokens=usage.cached_input,
            outputTokens=usage.output,
            reasoningTokens=usage.reasoning,
            totalTokens=usage.total,
            modelCalls=calls,
            costUsd=cost,
        )


class UsageRow(UsageTotals):
    session: str | None = Field(
        default=None, description="With `group_by=session`: the session's (chat's) id."
    )
    agent: str | None = Field(default=None, description="With `group_by=agent`.")
    model: str | None = Field(default=None, description="With `group_by=model`: its spec.")
    day: str | None = Field(default=None, description="With `group_by=day`: a UTC date.")


class UsageReport(BaseModel):
    tenant: str
    start: datetime = Field(description="Included.")
    end: datetime = Field(description="Excluded.")
    groupBy: list[str]  # noqa: N815
    rows: list[UsageRow] = Field(description="One per group, ordered by the groups' keys.")
    total: UsageTotals
    unpricedModels: list[str] = Field(  # noqa: N815
        description="Models of the range without a price (their cost is unknown)."
    )
