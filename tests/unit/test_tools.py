"""`@tool` builds a validated argument model and a JSON schema from the signature."""

from datetime import timedelta

import pytest

from perdure import Agent, ClientTool, ToolContext, tool
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


def test_a_client_tool_may_not_share_a_name_with_a_server_tool() -> None:
    class Clashing(Agent):
        name = "clashing"
        client_tools = (ClientTool(name="refund", description="Refund in the browser."),)

        @tool
        async def refund(self, order_id: str) -> str:
            """Refund an order."""
            return order_id

    with pytest.raises(ValueError, match="two tools are named 'refund'"):
        AgentRegistry([Clashing()])


def test_a_client_tool_needs_an_object_schema_and_a_provider_safe_name() -> None:
    with pytest.raises(ValueError, match="object schema"):
        ClientTool(name="pick", description="Pick.", parameters={"type": "string"})
    with pytest.raises(ValueError, match="a name is"):
        ClientTool(name="pick a file", description="Pick.")


def test_an_approval_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="wait timeout"):

        @tool(needs_approval=True, approval_timeout=timedelta(0))
        async def refund(self: object, order_id: str) -> str:
            """Refund an order."""
            return order_id


async def test_needs_approval_may_decide_per_call_sync_or_async() -> None:
    async def over_100(arguments: dict[str, object], ctx: ToolContext) -> bool:
        return float(str(arguments["amount"])) > 100

    class Refunds(Agent):
        @tool(needs_approval=lambda arguments, ctx: arguments["amount"] > 100)
        async def refund(self, amount: float) -> str:
            """Refund."""
            return "ok"

        @tool(needs_approval=over_100)
        async def refund_async(self, amount: float) -> str:
            """Refund."""
            return "ok"

    tools = Refunds().tools()
    context = ToolContext("t", "s", "sub", "call", "default")
    for name in ("refund", "refund_async"):
        assert await tools[name].approval_needed({"amount": 500}, context)
        assert not await tools[name].approval_needed({"amount": 5}, context)
