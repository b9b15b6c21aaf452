"""Agents the end-to-end tests serve (PERDURE_AGENTS=tests.agents), one per provider API."""

from perdure.default_agent import DefaultAgent


class ChatCompletionsAgent(DefaultAgent):
    name = "default"


class ResponsesAgent(DefaultAgent):
    name = "responses"
    model = "openai-responses:gpt-fake"


class AnthropicAgent(DefaultAgent):
    name = "anthropic"
    model = "anthropic:claude-fake"
