"""The agent served when PERDURE_AGENTS names none: two harmless tools."""

import ast
import operator
from datetime import UTC, datetime
from typing import Any

from perdure.agent import Agent
from perdure.tools import tool

_OPERATORS: dict[type[Any], Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_MAX_EXPRESSION = 200
_MAX_EXPONENT = 100


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError("exponent too large")
        result: float | int = _OPERATORS[type(node.op)](left, right)
        return result
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        unary: float | int = _OPERATORS[type(node.op)](_evaluate(node.operand))
        return unary
    raise ValueError("only numbers and + - * / // % ** are allowed")


def calculate_expression(expression: str) -> float | int:
    if len(expression) > _MAX_EXPRESSION:
        raise ValueError(f"expression longer than {_MAX_EXPRESSION} characters")
    return _evaluate(ast.parse(expression, mode="eval"))


class DefaultAgent(Agent):
    name = "default"
    system_prompt = (
        "You are Perdure's default assistant. Answer briefly. Use the tools for arithmetic "
        "and for the current time."
    )

    @tool
    async def calculate(self, expression: str) -> float | int:
        """Evaluate an arithmetic expression such as `12 * (3 + 4)`."""
        return calculate_expression(expression)

    @tool
    async def current_time(self) -> str:
        """The current date and time in UTC, ISO 8601."""
        return datetime.now(UTC).isoformat(timespec="seconds")
