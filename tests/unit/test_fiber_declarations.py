"""Declaring fibers (`@fiber`) and choosing the fiber a start means."""

from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from perdure import Agent, FiberContext, fiber
from perdure.domain.fiber_payloads import FiberKind, UnknownFiber, resolve_fiber_kind


def kind(agent: str, name: str) -> FiberKind:
    return FiberKind(
        agent=agent,
        name=name,
        max_age_seconds=60,
        max_run_seconds=60,
        max_attempts=3,
        hook_timeout_seconds=5,
    )


KINDS = [kind("a", "sync"), kind("b", "sync"), kind("b", "report")]


@pytest.mark.parametrize(
    ("agent", "caller", "name", "chosen"),
    [
        ("a", None, "sync", ("a", "sync")),
        (None, None, "report", ("b", "report")),
        (None, "a", "sync", ("a", "sync")),
        (None, "b", "sync", ("b", "sync")),
        (None, "a", "report", ("b", "report")),
    ],
)
def test_a_start_means_the_named_agents_fiber_else_the_callers_else_the_only_one(
    agent: str | None, caller: str | None, name: str, chosen: tuple[str, str]
) -> None:
    found = resolve_fiber_kind(KINDS, name=name, agent=agent, caller_agent=caller)

    assert (found.agent, found.name) == chosen


@pytest.mark.parametrize(
    ("agent", "name", "message"),
    [
        (None, "sync", "several agents declare fiber 'sync' (a, b): name the agent"),
        (None, "nope", "unknown fiber 'nope'; known fibers: a.sync, b.report, b.sync"),
        ("a", "report", "agent 'a' declares no fiber 'report'"),
        ("z", "sync", "unknown agent 'z' (no fibers)"),
    ],
)
def test_a_start_no_fiber_matches_is_refused_saying_what_is_known(
    agent: str | None, name: str, message: str
) -> None:
    with pytest.raises(UnknownFiber, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_fiber_kind(KINDS, name=name, agent=agent)


class Order(BaseModel):
    order_id: str


class Shop(Agent):
    name = "shop"
    fiber_max_age = timedelta(hours=2)

    @fiber
    async def ship(self, ctx: FiberContext, payload: Order) -> str:
        return payload.order_id

    @fiber(name="tidy-up", max_age=timedelta(minutes=5), max_attempts=2)
    async def tidy(self, ctx: FiberContext) -> None:
        """Tidy the shop."""


def test_an_agent_lists_its_fibers_by_name_with_their_options() -> None:
    fibers = Shop().fibers()

    assert sorted(fibers) == ["ship", "tidy-up"]
    assert fibers["tidy-up"].max_age == timedelta(minutes=5)
    assert fibers["tidy-up"].max_attempts == 2
    assert fibers["tidy-up"].description == "Tidy the shop."
    assert fibers["ship"].max_age is None  # the agent's fiber_max_age applies


def test_a_fibers_payload_is_validated_as_its_annotation() -> None:
    ship = Shop().fibers()["ship"]

    assert ship.parse_payload({"order_id": "o-1"}) == Order(order_id="o-1")
    with pytest.raises(ValidationError):
        ship.parse_payload({"order": 1})


@pytest.mark.parametrize(
    ("declare", "problem"),
    [
        (lambda: fiber(lambda self, ctx: None), "must be an async method"),
        (lambda: fiber(name="two words")(_noop), "must match"),
        (lambda: fiber(max_age=timedelta(0))(_noop), "max_age must be more than 0"),
        (lambda: fiber(max_attempts=0)(_noop), "max_attempts must be from 1 to 100"),
        (lambda: fiber(_too_many), "the signature must be"),
    ],
)
def test_a_fiber_declared_wrongly_is_refused_when_the_class_is_defined(
    declare: Any, problem: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=problem):
        declare()


async def _noop(self: Any, ctx: FiberContext) -> None:
    return None


async def _too_many(self: Any, ctx: FiberContext, payload: Any, extra: Any) -> None:
    return None
