"""What the real APIs refuse, refused here with their own error texts.

A fake of an external service is a specification of it: each rule below is one the real API
enforces, with the message as the API writes it (quoted from the API's documentation or from
public issue threads that show the raw error body; the source is cited with each rule). Every
function returns the `Rejection` for the first rule a request breaks, or None.
"""

import hashlib
import hmac
import re
import secrets
from typing import Any

from openai.types.chat import completion_create_params
from openai.types.responses import response_create_params

from perdure.testing.fakeprovider.gate import PREFILL_REJECTED, Rejection

# -- OpenAI -------------------------------------------------------------------------------------


def _keys(*typed_dicts: Any) -> frozenset[str]:
    return frozenset(
        key for cls in typed_dicts for key in cls.__required_keys__ | cls.__optional_keys__
    )


CHAT_PARAMETERS = _keys(
    completion_create_params.CompletionCreateParamsStreaming,
    completion_create_params.CompletionCreateParamsNonStreaming,
)
"""The documented Chat Completions body parameters, as the official SDK types them."""

RESPONSES_PARAMETERS = _keys(
    response_create_params.ResponseCreateParamsStreaming,
    response_create_params.ResponseCreateParamsNonStreaming,
)


def unrecognized_chat_arguments(body: dict[str, Any]) -> Rejection | None:
    """OpenAI refuses body parameters it does not know (vLLM's `continue_final_message`,
    DeepSeek's …): 400 `Unrecognized request argument supplied: reasoning_effort`, type
    `invalid_request_error`, param and code null (github.com/davidmigloz/langchain_dart/issues/712,
    coroot/coroot#698); several are listed as `Unrecognized request arguments supplied: a, b`
    (langchain-ai/langchain#8593)."""
    unknown = [key for key in body if key not in CHAT_PARAMETERS]
    if not unknown:
        return None
    noun = "argument" if len(unknown) == 1 else "arguments"
    return Rejection(400, f"Unrecognized request {noun} supplied: {', '.join(unknown)}")


def unknown_responses_parameter(body: dict[str, Any]) -> Rejection | None:
    """The Responses API: 400 `Unknown parameter: 'input[1].metadata'.`, param the parameter,
    code `unknown_parameter` (microsoft/agent-framework#2203)."""
    for key in body:
        if key not in RESPONSES_PARAMETERS:
            message = f"Unknown parameter: '{key}'."
            return Rejection(400, message, param=key, code="unknown_parameter")
    return None


def background_without_store(body: dict[str, Any]) -> Rejection | None:
    """Background mode stores the response so it can be polled, re-attached and cancelled: it
    requires `store` (default true). "When background mode is enabled, `store` is automatically
    set to `True` (required by the API)" (agno-agi/agno#7444; smg-project/smg#1215 "background=
    true requires store=true"). The wording of OpenAI's own message is not published; this is
    the one OpenAI-compatible servers use."""
    if body.get("background") and body.get("store") is False:
        return Rejection(400, "Background mode requires store=true.", param="store")
    return None


def responses_function_call_outputs(body: dict[str, Any]) -> Rejection | None:
    """Every `function_call` input item needs its `function_call_output`: 400 `No tool output
    found for function call call_Zyy2Z9PgYUZUZ01B7iKppSkS.` (quoted in public client code that
    handles it, e.g. github/copilot-cli#4572)."""
    raw = body.get("input")
    items = [item for item in raw if isinstance(item, dict)] if isinstance(raw, list) else []
    answered = {
        str(item.get("call_id")) for item in items if item.get("type") == "function_call_output"
    }
    for item in items:
        call_id = str(item.get("call_id"))
        if item.get("type") == "function_call" and call_id not in answered:
            message = f"No tool output found for function call {call_id}."
            return Rejection(400, message, param="input")
    return None


_OPENAI_EFFORTS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"^o\d+(-|$)"), ("low", "medium", "high")),
    (re.compile(r"^gpt-[1-4](\D|$)"), ()),
    (re.compile(r"^gpt-5\.1(\D|$)"), ("none", "low", "medium", "high")),
    (re.compile(r"^gpt-5\.\d"), ("none", "low", "medium", "high", "xhigh")),
    (re.compile(r"^gpt-5(\D|$)"), ("minimal", "low", "medium", "high")),
)
"""The reasoning efforts each OpenAI model takes, by id (perdure/domain/model_rules.py cites the
sources); any other id answers as today's models (`none` … `xhigh`)."""
_CURRENT_EFFORTS = ("none", "low", "medium", "high", "xhigh")


def _openai_efforts(model: str) -> tuple[str, ...]:
    return next(
        (efforts for pattern, efforts in _OPENAI_EFFORTS if pattern.match(model)),
        (_CURRENT_EFFORTS),
    )


def _quoted(values: tuple[str, ...]) -> str:
    quoted = [f"'{value}'" for value in values]
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def _effort_rejection(model: str, effort: object, param: str) -> Rejection | None:
    """A model without reasoning refuses any effort: "Unsupported parameter: 'reasoning.effort'
    is not supported with this model." (code `unsupported_parameter`, BoundaryML/baml#2708); a
    reasoning model refuses an effort it does not know: "Unsupported value: 'reasoning_effort'
    does not support null with this model. Supported values are: 'none', 'low', 'medium', and
    'high'." (code `unsupported_value`, livekit/agents#3966)."""
    efforts = _openai_efforts(model)
    if not efforts:
        message = f"Unsupported parameter: '{param}' is not supported with this model."
        return Rejection(400, message, param=param, code="unsupported_parameter")
    if effort not in efforts:
        shown = "null" if effort is None else f"'{effort}'"
        message = (
            f"Unsupported value: '{param}' does not support {shown} with this model. "
            f"Supported values are: {_quoted(efforts)}."
        )
        return Rejection(400, message, param=param, code="unsupported_value")
    return None


def chat_reasoning_effort(body: dict[str, Any]) -> Rejection | None:
    if "reasoning_effort" not in body:
        return None
    return _effort_rejection(
        str(body.get("model", "")), body["reasoning_effort"], "reasoning_effort"
    )


def responses_reasoning_effort(body: dict[str, Any]) -> Rejection | None:
    reasoning = body.get("reasoning")
    if not isinstance(reasoning, dict) or "effort" not in reasoning:
        return None
    return _effort_rejection(str(body.get("model", "")), reasoning["effort"], "reasoning.effort")


_MISSING_TOOL_RESPONSES = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to "
    "each 'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
"""router-for-me/CLIProxyAPI#2798, sdcb/chats#132: type `invalid_request_error`, param
`messages.[N].role`, code null."""
_ORPHAN_TOOL_MESSAGE = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
    "with 'tool_calls'."
)
"""Sic ("preceeding"): smarter-sh/smarter#264, miurla/morphic#136, sdcb/chats#132."""
_UNKNOWN_TOOL_CALL_ID = (
    "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."
)
"""dapr/dapr-agents#145."""


def chat_tool_messages(body: dict[str, Any]) -> Rejection | None:
    """Every assistant `tool_calls` must be answered by the `tool` messages right after it, and
    every `tool` message must answer a call of the assistant message before those."""
    messages: list[dict[str, Any]] = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    index = 0
    while index < len(messages):
        message = messages[index]
        if message.get("role") == "tool":
            return Rejection(400, _ORPHAN_TOOL_MESSAGE, param=f"messages.[{index}].role")
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        index += 1
        if not calls:
            continue
        wanted = [str(call.get("id")) for call in calls if isinstance(call, dict)]
        answered: set[str] = set()
        while index < len(messages) and messages[index].get("role") == "tool":
            call_id = str(messages[index].get("tool_call_id"))
            if call_id not in wanted:
                return Rejection(400, _UNKNOWN_TOOL_CALL_ID.format(id=call_id))
            answered.add(call_id)
            index += 1
        missing = [call_id for call_id in wanted if call_id not in answered]
        if missing:
            message_text = _MISSING_TOOL_RESPONSES.format(ids=", ".join(missing))
            return Rejection(400, message_text, param=f"messages.[{index}].role")
    return None


# -- Anthropic ----------------------------------------------------------------------------------

TRAILING_WHITESPACE = "messages: final assistant content cannot end with trailing whitespace"
"""The docs: "The prefill content cannot end with trailing whitespace"
(https://docs.claude.com/en/docs/build-with-claude/prompt-engineering/prefill-claudes-response);
the message as public reports quote the API's error body."""

_THINKING_BUDGET_MINIMUM = (
    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
)
"""danny-avila/LibreChat#8346 (through Bedrock; the Messages API validates the same field)."""
_THINKING_BUDGET_ABOVE_MAX = (
    "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation "
    "at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    "#max-tokens-and-context-window-size"
)
"""liuw1535/antigravity2api-nodejs#150; "budget_tokens must be set to a value less than
max_tokens" (https://platform.claude.com/docs/en/build-with-claude/extended-thinking)."""
_THINKING_FIRST = (
    "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
    "recommend you include thinking blocks from previous turns. To avoid this requirement, "
    "disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)
"""anomalyco/opencode#3077, n8n-io/n8n#22550. It is what a prefill gets with thinking on:
"Prefilling is only available for non-extended thinking modes"
(https://docs.claude.com/en/docs/prefill-claudes-response), and what a tool-use loop gets when
the assistant message's thinking block is not passed back
(https://platform.claude.com/docs/build-with-claude/thinking-tool-workflows)."""
_TOOL_USE_WITHOUT_RESULT = (
    "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
    "{ids}. Each `tool_use` block must have a corresponding `tool_result` block in the next "
    "message."
)
"""anthropics/claude-code#2697, #5060, #5989."""
_RESULT_WITHOUT_TOOL_USE = (
    "messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result` blocks: "
    "{id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous "
    "message."
)
"""anthropics/claude-code#13460, router-for-me/CLIProxyAPI#497."""


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def _types(message: dict[str, Any]) -> list[str]:
    return [str(block.get("type")) for block in _blocks(message)]


def claude_version(model: str) -> tuple[int, int]:
    """`claude-sonnet-4-5[-20250929]` → (4, 5), `claude-3-7-sonnet-…` → (3, 7), `claude-opus-5`
    → (5, 0); an id without a version answers as today's models do (99, 0)."""
    match = _CLAUDE_VERSION.match(model)
    if match is None:
        return (99, 0)
    return (int(match["major"]), int(match["minor"] or 0))


_CLAUDE_VERSION = re.compile(r"^claude-(?:[a-z]+-)?(?P<major>\d)(?:-(?P<minor>\d{1,2}))?(?=-|$)")
PREFILL_FROM = (4, 6)
"""Claude 4.6 removed assistant-message prefill ("Prefilling assistant messages returns a 400
error on Claude 4.6 models", platform.claude.com migration guide, "Prefill removal")."""
ADAPTIVE_FROM = (4, 6)
"""Adaptive thinking is supported from Claude 4.6 ("Older models (Sonnet 4.5, Opus 4.5, etc.)
do not support adaptive thinking", platform.claude.com/docs/en/build-with-claude/
adaptive-thinking)."""
ADAPTIVE_ONLY_FROM = (4, 7)
"""Claude Opus 4.7 and later take adaptive thinking only, and refuse sampling parameters; their
thinking display defaults to `omitted` (perdure/domain/model_rules.py cites each source)."""
XHIGH_FROM = (4, 7)
"""The `xhigh` effort arrived with Claude Opus 4.7 (NousResearch/hermes-agent#11137)."""
_ENABLED_NOT_SUPPORTED = (
    '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" and '
    '"output_config.effort" to control thinking behavior.'
)
"""NousResearch/hermes-agent#11137 (claude-opus-4-7), cline/cline#12010 (claude-sonnet-5)."""
_ADAPTIVE_NOT_SUPPORTED = "adaptive thinking is not supported on this model"
"""Models before 4.6 refuse `{"type": "adaptive"}` with a 400 invalid_request_error (the
adaptive-thinking page above); the wording of that error is not on public record."""
_EFFORT_NOT_SUPPORTED = "output_config.effort: 'xhigh' is not supported on this model"
"""Claude 4.6 takes low, medium, high and max; the wording is not on public record."""
_SAMPLING_DEPRECATED = "`{name}` is deprecated for this model."
"""Comfy-Org/ComfyUI#13923 (claude-opus-4-7, invalid_request_error)."""
_TEMPERATURE_WITH_THINKING = (
    "`temperature` may only be set to 1 when thinking is enabled. Please consult our "
    "documentation at https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking"
    "#important-considerations-when-using-extended-thinking"
)
"""MartialBE/one-hub#529."""


def thinking_type(body: dict[str, Any]) -> str | None:
    thinking = body.get("thinking")
    return str(thinking.get("type")) if isinstance(thinking, dict) else None


def thinking_enabled(body: dict[str, Any]) -> bool:
    """Thinking is on: `enabled` with a budget, or `adaptive` (the fake always thinks then)."""
    return thinking_type(body) in ("enabled", "adaptive")


def thinking_shown(body: dict[str, Any]) -> bool:
    """The thinking text is streamed: display `summarized`, or the model's default, which is
    `omitted` from Claude 4.7 on (the block then carries only its signature)."""
    display = body["thinking"].get("display") if thinking_enabled(body) else None
    if display is not None:
        return bool(display == "summarized")
    return claude_version(str(body.get("model", ""))) < ADAPTIVE_ONLY_FROM


def anthropic_generation(body: dict[str, Any]) -> Rejection | None:
    """What the model's generation refuses: prefill (4.6+), `enabled` thinking (4.7+),
    adaptive thinking (before 4.6), the `xhigh` effort (before 4.7), sampling parameters
    (4.7+), and a temperature other than 1 with thinking on (every model)."""
    version = claude_version(str(body.get("model", "")))
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if version >= PREFILL_FROM and messages and messages[-1].get("role") == "assistant":
        return Rejection(400, PREFILL_REJECTED)
    kind = thinking_type(body)
    if kind == "enabled" and version >= ADAPTIVE_ONLY_FROM:
        return Rejection(400, _ENABLED_NOT_SUPPORTED)
    if kind == "adaptive" and version < ADAPTIVE_FROM:
        return Rejection(400, _ADAPTIVE_NOT_SUPPORTED)
    output_config = body.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, dict) else None
    if effort == "xhigh" and version < XHIGH_FROM:
        return Rejection(400, _EFFORT_NOT_SUPPORTED)
    for name in ("temperature", "top_p", "top_k"):
        if name in body and version >= ADAPTIVE_ONLY_FROM:
            return Rejection(400, _SAMPLING_DEPRECATED.format(name=name))
    if thinking_enabled(body) and body.get("temperature", 1) != 1:
        return Rejection(400, _TEMPERATURE_WITH_THINKING)
    return None


def anthropic_thinking_config(body: dict[str, Any]) -> Rejection | None:
    """`thinking: {type: "enabled", budget_tokens}`: at least 1024 and below `max_tokens`."""
    if thinking_type(body) != "enabled":
        return None
    budget = body["thinking"].get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return Rejection(400, _THINKING_BUDGET_MINIMUM)
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and max_tokens <= budget:
        return Rejection(400, _THINKING_BUDGET_ABOVE_MAX)
    return None


def anthropic_tool_pairs(body: dict[str, Any]) -> Rejection | None:
    """Each `tool_use` needs its `tool_result` in the very next (user) message, and each
    `tool_result` a `tool_use` in the message right before it."""
    messages: list[dict[str, Any]] = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for index, message in enumerate(messages):
        blocks = _blocks(message)
        if message.get("role") == "user":
            previous = _blocks(messages[index - 1]) if index > 0 else []
            offered = {str(b.get("id")) for b in previous if b.get("type") == "tool_use"}
            for position, block in enumerate(blocks):
                tool_use_id = str(block.get("tool_use_id"))
                if block.get("type") == "tool_result" and tool_use_id not in offered:
                    text = _RESULT_WITHOUT_TOOL_USE.format(
                        index=index, block=position, id=tool_use_id
                    )
                    return Rejection(400, text)
            continue
        uses = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
        following = _blocks(messages[index + 1]) if index + 1 < len(messages) else []
        results = {str(b.get("tool_use_id")) for b in following if b.get("type") == "tool_result"}
        missing = [tool_use_id for tool_use_id in uses if tool_use_id not in results]
        if missing:
            text = _TOOL_USE_WITHOUT_RESULT.format(index=index, ids=", ".join(missing))
            return Rejection(400, text)
    return None


def anthropic_thinking_blocks(body: dict[str, Any]) -> Rejection | None:
    """With thinking on, the assistant message the request continues (a final prefill, or the
    one before final tool results) must start with a thinking block."""
    if not thinking_enabled(body):
        return None
    messages: list[dict[str, Any]] = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not messages:
        return None
    last = messages[-1]
    index = len(messages) - 1
    if last.get("role") == "user":
        if "tool_result" not in _types(last) or index == 0:
            return None
        index -= 1
    types = _types(messages[index])
    if types and types[0] not in ("thinking", "redacted_thinking"):
        return Rejection(400, _THINKING_FIRST.format(index=index, found=types[0]))
    return None


_SIGNING_KEY = secrets.token_bytes(32)
"""This fake's own key: a signature it did not issue for exactly that thinking is refused."""
_INVALID_SIGNATURE = "messages.{index}.content.{block}: Invalid `signature` in `{kind}` block"
"""anthropics/claude-code#10627, #42373. The check fails "when a `thinking`/`redacted_thinking`
block reaching the API differs in any way from what was originally returned (edited or
re-serialized `thinking`/`signature` text, blocks reordered or merged …)" and it applies to
past turns' blocks too: "Anthropic ignores past-turn thinking for generation but still
validates the signatures" (anthropics/anthropic-sdk-python#1598, openclaw/openclaw#99382)."""


def sign_thinking(thinking: str) -> str:
    """The signature this fake gives a thinking block (an HMAC of its exact text)."""
    digest = hmac.new(_SIGNING_KEY, thinking.encode(), hashlib.sha256).hexdigest()
    return f"sig_{digest}"


def anthropic_signatures(body: dict[str, Any]) -> Rejection | None:
    """Every `thinking` block passed back must carry the signature issued for its exact text;
    this fake issues no `redacted_thinking`, so any such block is one it never returned."""
    messages: list[dict[str, Any]] = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        for position, block in enumerate(_blocks(message)):
            kind = block.get("type")
            valid = kind == "thinking" and hmac.compare_digest(
                str(block.get("signature", "")), sign_thinking(str(block.get("thinking", "")))
            )
            if kind in ("thinking", "redacted_thinking") and not valid:
                text = _INVALID_SIGNATURE.format(index=index, block=position, kind=kind)
                return Rejection(400, text)
    return None


def anthropic_trailing_whitespace(body: dict[str, Any]) -> Rejection | None:
    messages: list[dict[str, Any]] = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not messages or messages[-1].get("role") != "assistant":
        return None
    texts = [str(b.get("text", "")) for b in _blocks(messages[-1]) if b.get("type") == "text"]
    if texts and texts[-1] != texts[-1].rstrip():
        return Rejection(400, TRAILING_WHITESPACE)
    return None


def first_violation(body: dict[str, Any], *rules: Any) -> Rejection | None:
    for rule in rules:
        rejection: Rejection | None = rule(body)
        if rejection is not None:
            return rejection
    return None
