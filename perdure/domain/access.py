"""Access rules, pure: rate limits (`30/minute`), tenant and agent names, CORS origins.

Shared by the settings (PERDURE_RATE_LIMIT, PERDURE_CORS_ORIGINS), the store (tenant policies,
rate buckets), the gateway and `perdure tenants`, so each is validated the same way everywhere.
"""

import re
from dataclasses import dataclass

from perdure.domain.prompt_schedules import TENANT_PATTERN

AGENT_PATTERN = r"^[A-Za-z0-9_\-.]{1,200}$"
"""The agent names a request may give (as gateway/schemas.py)."""
TENANT = re.compile(TENANT_PATTERN)
AGENT = re.compile(AGENT_PATTERN)
MAX_ALLOWED_AGENTS = 100
RATE_FORMAT = "N/second, N/minute, N/hour or N/day (N from 1 to 1000000)"
MAX_RATE_COUNT = 1_000_000
UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_RATE = re.compile(r"^\s*(\d{1,7})\s*/\s*([a-z]+)\s*$")
_ORIGIN = re.compile(
    r"^https?://(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*"
    r"|\[[0-9a-f:.]+\])(?::(\d{1,5}))?$"
)
"""`scheme://host[:port]` as a browser sends it in `Origin`: lower case, no path or slash."""


@dataclass(frozen=True)
class Rate:
    """`count` submissions per `period_seconds`, as a token bucket: `count` may be spent at once,
    and the bucket refills continuously at `count / period_seconds` a second."""

    count: int
    period_seconds: int

    @classmethod
    def parse(cls, text: str) -> "Rate":
        """Raise `ValueError` with the expected form when `text` is not one."""
        match = _RATE.match(text.lower())
        if match is None or match.group(2) not in UNITS:
            raise ValueError(f"a rate must be {RATE_FORMAT}, not {text[:40]!r}")
        count = int(match.group(1))
        if not 1 <= count <= MAX_RATE_COUNT:
            raise ValueError(f"a rate must be {RATE_FORMAT}, not {text[:40]!r}")
        return cls(count=count, period_seconds=UNITS[match.group(2)])

    def __str__(self) -> str:
        unit = next(name for name, seconds in UNITS.items() if seconds == self.period_seconds)
        return f"{self.count}/{unit}"

    @property
    def per_second(self) -> float:
        return self.count / self.period_seconds


def checked_tenant(name: str) -> str:
    if not TENANT.match(name):
        raise ValueError(f"a tenant must be 1-200 of A-Z a-z 0-9 _ . -, not {name[:40]!r}")
    return name


def parse_agents(text: str) -> list[str]:
    """`a,b` → `["a", "b"]`: distinct, in order, each a valid agent name."""
    agents: list[str] = []
    for item in text.split(","):
        name = item.strip()
        if not AGENT.match(name):
            raise ValueError(f"an agent must be 1-200 of A-Z a-z 0-9 _ . -, not {name[:40]!r}")
        if name not in agents:
            agents.append(name)
    if len(agents) > MAX_ALLOWED_AGENTS:
        raise ValueError(f"at most {MAX_ALLOWED_AGENTS} agents")
    return agents


def parse_origins(text: str) -> tuple[str, ...]:
    """`https://app.example.com,http://localhost:3000` → each checked as `scheme://host[:port]`
    (http or https, no path, query, user or trailing slash), or the single `*`."""
    origins: list[str] = []
    for item in text.split(","):
        origin = item.strip()
        if origin == "*":
            origins.append(origin)
            continue
        match = _ORIGIN.match(origin)
        if match is None or not 0 < int(match.group(1) or "443") < 65536:
            raise ValueError(
                f"a CORS origin must be scheme://host[:port] in lower case (http or https, "
                f"no path, no trailing slash), not {origin[:80]!r}"
            )
        if origin not in origins:
            origins.append(origin)
    if "*" in origins and len(origins) > 1:
        raise ValueError("`*` allows every origin: give it alone, or list exact origins")
    return tuple(origins)
