"""`@tool` builds a validated argument model and a JSON schema from the signature."""

import pytest

from perdure import Agent, ToolContext, tool
from perdure.agents_registry import AgentRegistry
from perdure.default_agent import DefaultAgent, calculate_expression
from perdure.tools import ToolArgumentsError, capped_output

CONTEXT = ToolContext(
    tenant_id="acme", session_id="s1", submission_id="sub1", tool_call_id="c1", agent="shop"
)


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

    @tool
    async def my_orders(self, ctx: ToolContext, status: str = "open") -> str:
        """List the caller's orders."""
        return f"{ctx.tenant_id}/{ctx.session_id}/{status}"


def test_a_tool_schema_comes_from_the_signature() -> None:
    spec = Shop().tools()["add"].spec

    assert spec.description == "Add two numbers."
    assert spec.parameters["properties"]["a"]["type"] == "integer"
    assert spec.parameters["required"] == ["a"]


async def test_a_tool_is_invoked_with_validated_arguments() -> None:
    agent = Shop()

    assert await agent.tools()["add"].invoke(agent, {"a": "2", "b": 3}, CONTEXT) == 5


async def test_bad_tool_arguments_raise_a_clear_error() -> None:
    agent = Shop()

    with pytest.raises(ToolArgumentsError, match="add"):
        await agent.tools()["add"].invoke(agent, {"a": "two"}, CONTEXT)


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


async def test_a_tool_that_asks_for_the_context_gets_the_tenant_and_session() -> None:
    agent = Shop()

    assert await agent.tools()["my_orders"].invoke(agent, {}, CONTEXT) == "acme/s1/open"


def test_the_tool_context_is_not_an_argument_the_model_sees() -> None:
    spec = Shop().tools()["my_orders"].spec

    assert set(spec.parameters["properties"]) == {"status"}


def test_an_output_within_the_cap_is_unchanged() -> None:
    assert capped_output({"rows": [1, 2]}, 100) == {"rows": [1, 2]}


def test_an_output_over_the_cap_is_cut_with_a_visible_marker() -> None:
    capped = capped_output("x" * 5000, 1000)

    assert isinstance(capped, str)
    assert capped.startswith("x" * 1000)
    assert capped.endswith("[output truncated: 1000 of 5000 bytes kept]")


def test_an_agent_with_a_tool_needing_approval_refuses_to_load() -> None:
    class Refunds(Agent):
        name = "refunds"

        @tool(needs_approval=True)
        async def refund(self, order_id: str) -> str:
            """Refund an order."""
            return order_id

    with pytest.raises(ValueError, match="needs_approval=True.*not supported yet"):
        AgentRegistry([Refunds()])
