"""What each provider API accepts, per model generation, and the agent options it refuses.

Providers change their APIs per model generation; a request built for the previous one earns a
400 on the next. Each rule set here names the models it covers and cites the documentation it
comes from. A model id no rule set knows gets the current generation's rules (the newest
models are where unknown ids come from); `PERDURE_MODEL_FAMILIES` names the family of a model
id that is not recognised (a fine-tune, a proxy's alias).

Anthropic (Messages API), by Claude version:

- **up to 4.5** (`claude-sonnet-4-5`, `claude-opus-4-5`, `claude-haiku-4-5`, `claude-3-7-…`):
  prefill continues a final assistant message; thinking is `{"type": "enabled",
  "budget_tokens": N}` only ("Older models (Sonnet 4.5, Opus 4.5, etc.) do not support adaptive
  thinking and require thinking.type: "enabled" with budget_tokens",
  https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking); thinking is shown
  summarized.
- **4.6** (`claude-opus-4-6`, `claude-sonnet-4-6`): "Prefilling assistant messages returns a
  400 error on Claude 4.6 models" (https://platform.claude.com/docs/en/about-claude/models/
  migration-guide, "Prefill removal"); thinking `adaptive` with `output_config.effort` (`low`,
  `medium`, `high`, `max`), or `enabled` with a budget, deprecated (same adaptive-thinking
  page); thinking display defaults to `summarized`.
- **4.7 and later** (`claude-opus-4-7`, `claude-opus-4-8`, `claude-mythos-…`, `claude-fable-5`,
  `claude-opus-5`, `claude-sonnet-5`, the other 5.x models): no prefill; "Claude Mythos 5,
  Claude Fable 5, Claude Opus 4.7, and Claude Mythos Preview only support adaptive thinking.
  Manual extended thinking (thinking.type: "enabled" with budget_tokens) … will return a 400
  error" (Amazon Bedrock, "Adaptive thinking"; the 400 reads ""thinking.type.enabled" is not
  supported for this model. Use "thinking.type.adaptive" and "output_config.effort" to control
  thinking behavior.", cline/cline#12010 for `claude-sonnet-5`); the effort `xhigh` is new; the
  thinking display defaults to `omitted`, the thinking block arriving empty with its signature
  (platform.claude.com/docs/en/about-claude/models/whats-new-claude-4-7, "Thinking content
  omitted by default"; anthropics/claude-code#49268; promptfoo/promptfoo#10830 lists Fable 5,
  Mythos 5, Opus 5, Opus 4.7/4.8 and Sonnet 5); `temperature`, `top_p` and `top_k` are refused
  ("`temperature` is deprecated for this model", invalid_request_error,
  Comfy-Org/ComfyUI#13923; "Sampling parameters removed", platform.claude.com
  migration-guide#migrating-to-claude-opus-4-7).

Perdure sends no sampling parameters to any provider (the Anthropic SDK it uses no longer has
them), so an agent has none to set; the fake provider refuses them as each generation does.

OpenAI (Chat Completions `reasoning_effort`, Responses `reasoning.effort`), by model:

- **no reasoning** (`gpt-4.1…`, `gpt-4o…`, `gpt-3.5…`): an effort is a 400 ("Unsupported
  parameter: 'reasoning.effort' is not supported with this model.", code
  `unsupported_parameter`, BoundaryML/baml#2708; `reasoning_effort` on Chat Completions,
  mozilla-ai/any-llm#270).
- **o-series** (`o1`, `o3`, `o4-mini`): `low`, `medium`, `high`.
- **gpt-5** (`gpt-5`, `gpt-5-mini`, `gpt-5-nano`): `minimal`, `low`, `medium`, `high`
  (Kilo-Org/cloud#3807 quotes the 400 listing them).
- **gpt-5.1**: `none`, `low`, `medium`, `high` ("Supported values are: 'none', 'low', 'medium',
  and 'high'.", code `unsupported_value`, livekit/agents#3966).
- **gpt-5.2 and later**, and ids without a version: also `xhigh` (OpenAI's reasoning guide,
  platform.openai.com/docs/guides/reasoning, as summarized in erode-app/erode#170).

Perdure speaks `low`, `medium`, `high`, `xhigh` and `max`; OpenAI has no `max`. Reasoning
summaries are a Responses feature (`reasoning.summary`), off unless asked for: a
`thinking_display` of `summarized` asks for them on `openai-responses:`; Chat Completions has no
such setting. Both adapters send `max_completion_tokens` / `max_output_tokens`, which every
current model accepts.
"""

import re
from typing import Literal

from pydantic import BaseModel

Effort = Literal["low", "medium", "high", "xhigh", "max"]
EFFORTS: tuple[Effort, ...] = ("low", "medium", "high", "xhigh", "max")
Display = Literal["summarized", "omitted"]
DISPLAYS: tuple[Display, ...] = ("summarized", "omitted")
Family = Literal[
    "claude-4.5",
    "claude-4.6",
    "claude-4.7",
    "openai",
    "openai-o",
    "openai-gpt-5",
    "openai-gpt-5.1",
    "openai-gpt-5.2",
]
FAMILIES: tuple[Family, ...] = (
    "claude-4.5",
    "claude-4.6",
    "claude-4.7",
    "openai",
    "openai-o",
    "openai-gpt-5",
    "openai-gpt-5.1",
    "openai-gpt-5.2",
)
MIN_THINKING_BUDGET = 1024


class ThinkingOptions(BaseModel, frozen=True):
    """An agent's thinking, in the form the API takes: a budget (`enabled`) or an effort
    (`adaptive`); `display` None means the model's default."""

    budget_tokens: int | None = None
    effort: Effort | None = None
    display: Display | None = None

    @property
    def on(self) -> bool:
        return self.budget_tokens is not None or self.effort is not None


class ModelRules(BaseModel, frozen=True):
    family: Family
    prefill: bool
    """A final assistant message is continued (else: a 400, continue by instruction)."""
    budget_thinking: bool
    """`thinking: {"type": "enabled", "budget_tokens": N}` is accepted."""
    efforts: tuple[Effort, ...]
    """The efforts `thinking: {"type": "adaptive"}` takes (none: adaptive is refused)."""
    default_display: Display | None
    """The thinking display when none is sent (None: the API has no such setting)."""


CLAUDE_4_5 = ModelRules(
    family="claude-4.5",
    prefill=True,
    budget_thinking=True,
    efforts=(),
    default_display="summarized",
)
CLAUDE_4_6 = ModelRules(
    family="claude-4.6",
    prefill=False,
    budget_thinking=True,
    efforts=("low", "medium", "high", "max"),
    default_display="summarized",
)
CLAUDE_4_7 = ModelRules(
    family="claude-4.7",
    prefill=False,
    budget_thinking=False,
    efforts=EFFORTS,
    default_display="omitted",
)
OPENAI = ModelRules(
    family="openai", prefill=False, budget_thinking=False, efforts=(), default_display=None
)
"""OpenAI models without reasoning (`gpt-4.1`, `gpt-4o`)."""
OPENAI_O = ModelRules(
    family="openai-o",
    prefill=False,
    budget_thinking=False,
    efforts=("low", "medium", "high"),
    default_display="omitted",
)
OPENAI_GPT_5 = OPENAI_O.model_copy(update={"family": "openai-gpt-5"})
OPENAI_GPT_5_1 = OPENAI_O.model_copy(update={"family": "openai-gpt-5.1"})
OPENAI_GPT_5_2 = OPENAI_O.model_copy(
    update={"family": "openai-gpt-5.2", "efforts": ("low", "medium", "high", "xhigh")}
)
RULES: dict[Family, ModelRules] = {
    rules.family: rules
    for rules in (
        CLAUDE_4_5,
        CLAUDE_4_6,
        CLAUDE_4_7,
        OPENAI,
        OPENAI_O,
        OPENAI_GPT_5,
        OPENAI_GPT_5_1,
        OPENAI_GPT_5_2,
    )
}

_CLAUDE_VERSION = re.compile(
    r"^claude-(?:[a-z]+-)?(?P<major>\d)(?:-(?P<minor>\d{1,2}))?(?=-|$)(?:-[a-z]+)?"
)
"""`claude-sonnet-4-5[-20250929]`, `claude-opus-4-20250514` (4.0), `claude-3-7-sonnet-…`."""


def claude_rules(model: str, families: dict[str, Family] | None = None) -> ModelRules:
    """The rules of a Claude model id (`families`, `PERDURE_MODEL_FAMILIES`, first); an id
    without a version, or a newer one, is current."""
    named = (families or {}).get(model)
    if named is not None:
        return RULES[named]
    match = _CLAUDE_VERSION.match(model)
    if match is None:
        return CLAUDE_4_7
    version = (int(match["major"]), int(match["minor"] or 0))
    if version <= (4, 5):
        return CLAUDE_4_5
    if version == (4, 6):
        return CLAUDE_4_6
    return CLAUDE_4_7


_GPT_VERSION = re.compile(r"^gpt-(?P<major>\d+)(?:\.(?P<minor>\d+))?")
_O_SERIES = re.compile(r"^o\d+(?:-|$)")


def openai_rules(model: str, families: dict[str, Family] | None = None) -> ModelRules:
    """The rules of an OpenAI model id; an id without a version, or a newer one, is current."""
    named = (families or {}).get(model)
    if named is not None:
        return RULES[named]
    if _O_SERIES.match(model):
        return OPENAI_O
    match = _GPT_VERSION.match(model)
    if match is None:
        return OPENAI_GPT_5_2
    version = (int(match["major"]), int(match["minor"] or 0))
    if version < (5, 0):
        return OPENAI
    if version == (5, 0):
        return OPENAI_GPT_5
    if version == (5, 1):
        return OPENAI_GPT_5_1
    return OPENAI_GPT_5_2


def parse_families(text: str) -> dict[str, Family]:
    """`PERDURE_MODEL_FAMILIES`: `model-id=family,…`; ValueError naming a bad entry."""
    families: dict[str, Family] = {}
    for entry in (part.strip() for part in text.split(",") if part.strip()):
        model, separator, family = (piece.strip() for piece in entry.partition("="))
        if not separator or not model:
            raise ValueError(f"{entry!r} is not model-id=family")
        if family not in FAMILIES:
            raise ValueError(f"{entry!r}: the family must be one of {', '.join(FAMILIES)}")
        families[model] = family
    return families


def rules_for(spec: str, families: dict[str, Family] | None = None) -> ModelRules | None:
    """The rules of a model spec (`anthropic:claude-opus-4-7`); None for `demo`, which takes
    anything. `families` (`PERDURE_MODEL_FAMILIES`) overrides the recognition by id."""
    prefix, _, model = spec.strip().partition(":")
    model = model.strip()
    if prefix == "anthropic":
        return claude_rules(model, families)
    if prefix == "openai-responses":
        return openai_rules(model, families)
    if prefix == "openai":  # Chat Completions has no reasoning summaries: no display setting
        return openai_rules(model, families).model_copy(update={"default_display": None})
    return None


def refusals(rules: ModelRules, thinking: ThinkingOptions, max_output_tokens: int) -> list[str]:
    """What an agent asks that the model does not accept, each said plainly (empty: none)."""
    problems: list[str] = []
    family = rules.family
    if thinking.budget_tokens is not None and thinking.effort is not None:
        problems.append("set thinking_budget_tokens or thinking_effort, not both")
    if thinking.budget_tokens is not None:
        if not rules.budget_thinking:
            hint = " use thinking_effort instead" if rules.efforts else ""
            problems.append(
                f"thinking_budget_tokens is not accepted by {family} models (a 400 from the "
                f"provider);{hint}".rstrip(";")
            )
        elif thinking.budget_tokens < MIN_THINKING_BUDGET:
            problems.append(f"thinking_budget_tokens must be at least {MIN_THINKING_BUDGET}")
        elif thinking.budget_tokens >= max_output_tokens:
            problems.append("thinking_budget_tokens must be below max_output_tokens")
    if thinking.effort is not None and thinking.effort not in rules.efforts:
        if rules.efforts:
            accepted = ", ".join(rules.efforts)
            problems.append(
                f"thinking_effort {thinking.effort!r} is not accepted by {family} models "
                f"(they take {accepted})"
            )
        else:
            hint = "; use thinking_budget_tokens" if rules.budget_thinking else ""
            problems.append(f"thinking_effort is not accepted by {family} models{hint}")
    if thinking.display is not None:
        if not thinking.on:
            problems.append("thinking_display needs thinking (a budget or an effort)")
        elif rules.default_display is None:
            problems.append(f"thinking_display is not accepted by {family} models through this API")
    return problems
