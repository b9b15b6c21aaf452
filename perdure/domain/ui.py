"""AI SDK UI messages (what `useChat` holds) and UI message stream chunks (what it reads).

Only the shapes Perdure reads or writes are modelled; unknown fields are kept so a client's
message survives a round trip.
"""

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Role = Literal["system", "user", "assistant"]

# Part types a UIMessage may hold (AI SDK v5-v7). `tool-<name>` and `data-<name>` are open
# families and are matched by prefix.
KNOWN_PART_TYPES = frozenset(
    {
        "text",
        "reasoning",
        "file",
        "step-start",
        "source-url",
        "source-document",
        "dynamic-tool",
    }
)
_FAMILY_PART = re.compile(r"^(tool|data)-[A-Za-z0-9_.:\-]{1,128}$")

# Chunk types Perdure writes to a message log.
DROPPED_STEP = "data-dropped-step"
"""A part that drops the step it ends from what the model is sent: the client saw that step
and the stored answer keeps it (the log is append-only), but the model never sees it again
(a recovery boot plan that left the partial out of its chain)."""

TERMINAL_CHUNK_TYPES = frozenset({"finish", "abort", "error"})


def is_known_part_type(part_type: str) -> bool:
    return part_type in KNOWN_PART_TYPES or bool(_FAMILY_PART.match(part_type))


PART_TYPE_PATTERN = (
    "^(" + "|".join(sorted(KNOWN_PART_TYPES)) + "|" + _FAMILY_PART.pattern[1:-1] + ")$"
)
"""`is_known_part_type` as a pattern, for the OpenAPI document."""


def _part_schema(schema: dict[str, Any]) -> None:
    """What the validator checks, told to clients and fuzzers too."""
    schema["properties"]["type"]["pattern"] = PART_TYPE_PATTERN
    schema["properties"]["text"] = {"type": "string", "description": "The text of a text part."}


class UIPart(BaseModel):
    """One part of a UIMessage; its fields depend on `type`."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_part_schema)

    type: str = Field(min_length=1, max_length=200)

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if not is_known_part_type(value):
            raise ValueError(f"unknown part type {value!r}")
        return value

    def field(self, name: str, default: Any = None) -> Any:
        return (self.model_extra or {}).get(name, default)


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1, max_length=200)
    role: Role
    parts: list[UIPart] = Field(default_factory=list, max_length=10_000)
    metadata: Any = None

    def text(self) -> str:
        return "".join(str(p.field("text", "")) for p in self.parts if p.type == "text")


Chunk = dict[str, Any]
"""A UI message stream chunk, exactly as sent on the wire (`{"type": ..., ...}`)."""
