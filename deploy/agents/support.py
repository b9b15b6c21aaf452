"""An example agent for the compose deployment: replace it with your own modules and name
them in PERDURE_AGENTS (deploy/.env.example)."""

from perdure import Agent, ToolContext, tool


class Support(Agent):
    name = "support"
    system_prompt = "You help customers of an online shop. Be brief."
    max_steps = 6

    @tool
    async def lookup_order(self, ctx: ToolContext, order_id: str) -> dict[str, str]:
        """Look an order up by its id."""
        return {"order_id": order_id, "status": "shipped", "tenant": ctx.tenant_id}
