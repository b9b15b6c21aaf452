"""The health check's answer."""

from typing import Literal

from pydantic import BaseModel


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    checks: dict[str, str]
