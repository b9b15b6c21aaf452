"""Shared by the recovery and load benchmarks: statistics, CPU time and peak memory of
processes, and the fake provider in a process of its own (so its CPU time is not the load
generator's)."""

import contextlib
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from bench.latency import percentile
from perdure.testing.agents import PERDURE_AGENTS

REPO = Path(__file__).parents[1]


@dataclass(frozen=True)
class Served:
    """What a benchmark's cluster serves: the agents the tests serve too
    (`perdure.testing.agents`), by module path (the worker processes load them)."""

    agents: str = PERDURE_AGENTS
    root: Path = REPO


SERVED = Served()
_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (Linux `/proc`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def command_cpu_seconds(command: str) -> float:
    """User + system CPU time of every live process whose command name is `command` (e.g. all
    of a PostgreSQL server's backends), summed."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            text = stat.read_text()
            if text[text.index("(") + 1 : text.rindex(")")] == command:
                fields = text.rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / _TICKS
    return total


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _status_mb(pid: int, field_name: str) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith(f"{field_name}:"):
            return int(line.split()[1]) / 1024  # kB
    return None


def peak_rss_mb(pid: int) -> float | None:
    """The peak resident memory of a live process so far (`VmHWM`, kept by the kernel), in MB;
    None when the process is gone."""
    return _status_mb(pid, "VmHWM")


def rss_mb(pid: int) -> float | None:
    """The resident memory of a live process now (`VmRSS`), in MB."""
    return _status_mb(pid, "VmRSS")


def own_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


class CpuMeter:
    """CPU seconds each named process spent between `start()` and `stop()`."""

    def __init__(self, pids: dict[str, int], commands: dict[str, str] | None = None) -> None:
        self.pids = pids
        self.commands = commands or {}
        """Named groups of processes by command name (`command_cpu_seconds`)."""
        self._before: dict[str, float] = {}
        self.spent: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        now = {"load generator (this process)": own_cpu_seconds()}
        for name, pid in self.pids.items():
            with contextlib.suppress(OSError):
                now[name] = cpu_seconds(pid)
        for name, command in self.commands.items():
            now[name] = command_cpu_seconds(command)
        return now

    def start(self) -> None:
        self._before = self._now()

    def stop(self) -> None:
        after = self._now()
        self.spent = {name: after[name] - self._before.get(name, 0.0) for name in after}

    def summary(self, wall: float) -> str:
        parts = [f"{name} {seconds:.1f}" for name, seconds in self.spent.items()]
        total = sum(self.spent.values())
        cores = os.cpu_count() or 1
        return (
            f"CPU seconds over the {wall:.1f} s run: " + ", ".join(parts) + f"; total {total:.1f}"
            f" of {wall * cores:.1f} available on {cores} cores"
        )


def stats(values: list[float], digits: int) -> str:
    """`p50 | p95 | max` cells, or dashes when there is nothing to summarise."""
    if not values:
        return "– | – | –"
    p50, p95, top = percentile(values, 50), percentile(values, 95), max(values)
    return f"{p50:.{digits}f} | {p95:.{digits}f} | {top:.{digits}f}"


def p50_p95(values: list[float], digits: int) -> str:
    """`p50 | p95` cells, or dashes when there is nothing to summarise."""
    if not values:
        return "– | –"
    return f"{percentile(values, 50):.{digits}f} | {percentile(values, 95):.{digits}f}"


@dataclass(frozen=True)
class ProviderRequest:
    """One request the fake provider recorded (see `RemoteFakeProvider.observe`)."""

    user_text: str
    status: int
    started_at: float
    """`time.monotonic()` in the fake's process when the request arrived."""
    delta_times: list[float]
    """`time.monotonic()` of every content delta written to the socket, in order."""


@dataclass(frozen=True)
class Observation:
    requests: list[ProviderRequest]
    clock_skew: float
    """How far the fake's `time.monotonic()` fell outside this process's before/after bracket
    of the request that read it (0 when inside: the two processes read one clock)."""
    bracket: float
    """The width of that bracket (seconds): the precision of the check."""


class RemoteFakeProvider:
    """`python -m perdure.testing.fakeprovider` in a subprocess; `env()` points the SDKs at it."""

    def __init__(self, log_dir: Path) -> None:
        self._log_path = log_dir / "fake-provider.log"
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> Self:
        log = open(self._log_path, "w")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(
            [sys.executable, "-m", "perdure.testing.fakeprovider", "--port", "0"],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("FAKE_PROVIDER_URL="):
            self.stop()
            raise RuntimeError(f"the fake provider did not start: {line!r}")
        self.url = line.split("=", 1)[1]
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def observe(self, contains: str = "") -> Observation:
        """The requests it recorded whose user text contains `contains`, read from its
        test-only observation route (`GET /_fake/requests`, perdure/testing/fakeprovider/server.py).

        Its times are `time.monotonic()` of its process: CLOCK_MONOTONIC is one clock for the
        whole machine on Linux, so they compare directly with this process's; `clock_skew`
        checks that on every read."""
        async with httpx.AsyncClient(timeout=60) as http:
            before = time.monotonic()
            response = await http.get(f"{self.url}/_fake/requests", params={"contains": contains})
            after = time.monotonic()
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        theirs = float(body["monotonic"])
        requests = [
            ProviderRequest(
                user_text=item["user_text"],
                status=int(item["status"]),
                started_at=float(item["started_at"]),
                delta_times=[float(t) for t in item["delta_times"]],
            )
            for item in body["requests"]
        ]
        return Observation(
            requests=requests,
            clock_skew=max(0.0, before - theirs, theirs - after),
            bracket=after - before,
        )

    def env(self, api_key: str = "fake-key") -> dict[str, str]:
        return {
            "OPENAI_BASE_URL": f"{self.url}/v1",
            "OPENAI_API_KEY": api_key,
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": api_key,
        }

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
