"""What the activities of a turn share: the store and the served agents, and the start of every
attempt that writes to the answer's log (a retry fences off the attempts before it)."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from activities._support import current_writer, resolve_agent, superseded
from perdure.agent import Agent
from perdure.agents_registry import AgentRegistry
from storage.chunks import LogWriter, StaleWriter, claim_log
from storage.db import Database


@dataclass(kw_only=True, eq=False)
class StoreActivity:
    """The base of an activity class: subclasses declare what else they need as fields."""

    db: Database


@dataclass(kw_only=True, eq=False)
class AgentActivity(StoreActivity):
    """An activity that runs the served agents' code (a turn's, a fiber's)."""

    agents: AgentRegistry

    def agent(self, name: str) -> Agent:
        """The turn's agent; an unknown one ends the turn (non-retryable)."""
        return resolve_agent(self.agents, name)

    async def claim(self, message_id: str) -> LogWriter:
        """This attempt as the writer of the answer's log. A retry first fences off the
        earlier attempts; a first attempt has none, and its first write claims the log."""
        writer = current_writer()
        if writer.attempt > 1:
            await claim_log(self.db, message_id=message_id, writer=writer)
        return writer


@contextmanager
def fenced() -> Iterator[None]:
    """A write the store refuses to this attempt (a newer one owns the log, or the turn ended)
    ends it as superseded, never retried."""
    try:
        yield
    except StaleWriter as error:
        raise superseded(error) from error
