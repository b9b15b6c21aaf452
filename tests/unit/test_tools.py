"""`@tool` builds a validated argument model and a JSON schema from the signature."""

import pytest

from perdure import Agent, tool
from perdure.default_agent import DefaultAgent, calculate_expression
from perdure.tools import ToolArgumentsError


class Shop(Agent):
    name = "shop"

    @tool
    async def add(self, a: int, b: int = 1) -> int:
        """Add two numbers."""
        return a + b

    @tool(idempotent=False)
    async def refund(self, order_id: str) -> str:
        """Refund an order."""
        return f"refunded {order_id}"


def test_a_tool_schema_comes_from_the_signature() -> None:
    spec = Shop().tools()["add"].spec()

    assert spec.description == "Add two numbers."
    assert spec.parameters["properties"]["a"]["type"] == "integer"
    assert spec.parameters["required"] == ["a"]


async def test_a_tool_is_invoked_with_validated_arguments() -> None:
    agent = Shop()

    assert await agent.tools()["add"].invoke(agent, {"a": "2", "b": 3}) == 5


async def test_bad_tool_arguments_raise_a_clear_error() -> None:
    agent = Shop()

    with pytest.raises(ToolArgumentsError, match="add"):
        await agent.tools()["add"].invoke(agent, {"a": "two"})


def test_idempotency_is_declared_per_tool() -> None:
    tools = Shop().tools()

    assert tools["add"].idempotent
    assert not tools["refund"].idempotent


def test_a_sync_function_cannot_be_a_tool() -> None:
    with pytest.raises(TypeError, match="async"):

        class Broken(Agent):
            @tool
            def nope(self) -> None:  # type: ignore[arg-type]
                return None


@pytest.mark.parametrize(
    ("expression", "value"), [("6*7", 42), ("2 ** 10", 1024), ("(1+2)/4", 0.75), ("-3 + 1", -2)]
)
def test_the_calculator_evaluates_arithmetic(expression: str, value: float) -> None:
    assert calculate_expression(expression) == value


@pytest.mark.parametrize("expression", ["__import__('os')", "a + 1", "9 ** 9999", "[1]"])
def test_the_calculator_refuses_anything_else(expression: str) -> None:
    with pytest.raises((ValueError, SyntaxError)):
        calculate_expression(expression)


def test_the_default_agent_offers_two_harmless_tools() -> None:
    assert set(DefaultAgent().tools()) == {"calculate", "current_time"}
