"""Tables of migration 0006 (`schedules`), and named after it: prompt schedules and the agents
workers serve. The store owns who a schedule belongs to and what it says; its Temporal Schedule
(domain.names.prompt_schedule_id) owns when it fires."""

from typing import Any

from sqlalchemy import JSON, Column, Text
from sqlmodel import Field, SQLModel


class PromptScheduleRow(SQLModel, table=True):
    __tablename__ = "schedules"

    tenant_id: str = Field(primary_key=True, max_length=200)
    id: str = Field(primary_key=True, max_length=64)
    agent: str = Field(max_length=200)
    session_id: str = Field(max_length=200)
    """The chat id the prompts go to, in the schedule's tenant (not a session's storage key)."""
    prompt: str = Field(sa_column=Column(Text, nullable=False))
    spec: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    """`domain.schedules.Recurrence` as JSON."""
    source: str = Field(max_length=16)
    """`declared` (on an agent, kept in step by the workers) or `api` (REST)."""
    paused: bool = False
    """As last set through Perdure; Temporal's schedule state is the one that counts."""
    created_at: float
    updated_at: float
    last_occurrence: str | None = Field(default=None, max_length=64)
    last_submission_id: str | None = Field(default=None, max_length=64)
    last_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    """Why the last occurrence could not be submitted (cleared by the next that could)."""


class ServedAgentRow(SQLModel, table=True):
    """The agents workers serve on a task queue, recorded at worker start, so the gateway
    (which never imports agent code) can refuse a schedule for an agent nobody serves."""

    __tablename__ = "served_agents"

    task_queue: str = Field(primary_key=True, max_length=200)
    name: str = Field(primary_key=True, max_length=200)
    seen_at: float
    concurrency: str = Field(default="queue", max_length=16)
    """The agent's concurrency strategy (`Agent.concurrency`), for the gateway to apply."""
    debounce_ms: int | None = None
    """With `debounce`: the agent's quiet period (`Agent.debounce`)."""
