"""Shared by the recovery and load benchmarks: statistics, CPU time of processes, and the fake
provider in a process of its own (so its CPU time is not the load generator's)."""

import contextlib
import os
import resource
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Self

from bench.latency import percentile

REPO = Path(__file__).parents[1]
_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (Linux `/proc`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    """CPU seconds each named process spent between `start()` and `stop()`."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._before: dict[str, float] = {}
        self.spent: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        now = {"load generator (this process)": own_cpu_seconds()}
        for name, pid in self.pids.items():
            with contextlib.suppress(OSError):
                now[name] = cpu_seconds(pid)
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


class RemoteFakeProvider:
    """`python -m tests.fakeprovider` in a subprocess; `env()` points the SDKs at it."""

    def __init__(self, log_dir: Path) -> None:
        self._log_path = log_dir / "fake-provider.log"
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> Self:
        log = open(self._log_path, "w")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.fakeprovider", "--port", "0"],
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
