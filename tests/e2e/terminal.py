"""`perdure …` in a real pseudo-terminal (pexpect), read as a person sees it.

The stack serves from the tests' own event loop, so every blocking read of the terminal runs
in a thread (`asyncio.to_thread`): the gateway keeps answering while a test waits.
"""

import asyncio
import contextlib
import os
import re
import sys
import time
from pathlib import Path

import pexpect

PERDURE = str(Path(sys.executable).with_name("perdure"))
ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\r")
"""Colours, cursor moves and carriage returns: what remains is the text that was drawn."""
TIMEOUT = 30.0
UP = "\x1b[A"
"""The Up arrow, as an xterm sends it."""
EOF_EVERY_SECONDS = 1.0


def client_env() -> dict[str, str]:
    """This environment, without a gateway address or key that would override the test's."""
    env = {k: v for k, v in os.environ.items() if k not in ("PERDURE_URL", "PERDURE_API_KEY")}
    env["TERM"] = "xterm-256color"
    env["PERDURE_CHAT_HISTORY"] = ""  # never the tester's own file; a test names its own
    return env


class Terminal:
    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self._child = pexpect.spawn(
            PERDURE,
            list(args),
            dimensions=(50, 120),
            encoding="utf-8",
            env={**client_env(), **(env or {})},
            timeout=TIMEOUT,
        )
        self._raw = ""
        self._mark = 0
        """Where the next `expect` starts looking in the shown text."""

    @property
    def drawn(self) -> str:
        """Everything the terminal was sent so far, escape codes and all."""
        return self._raw

    @property
    def shown(self) -> str:
        """Everything the terminal showed so far, escape codes removed."""
        return ESCAPES.sub("", self._raw)

    def _expect(self, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            shown = self.shown
            found = shown.find(text, self._mark)
            if found >= 0:
                since, self._mark = shown[self._mark : found], found + len(text)
                return since
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not shown within {timeout} s; shown:\n{shown}")
            try:
                self._raw += self._child.read_nonblocking(65536, timeout=0.1)
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                if text not in self.shown[self._mark :]:
                    raise AssertionError(
                        f"{text!r} never shown; it exited after:\n{shown}"
                    ) from None

    async def expect(self, text: str, timeout: float = TIMEOUT) -> str:
        """Wait until `text` is shown (after what earlier calls matched); what came before it."""
        return await asyncio.to_thread(self._expect, text, timeout)

    async def prompt(self) -> str:
        """Wait for the prompt; what was shown before it (an answer, say)."""
        return await self.expect("› ")

    async def type(self, line: str) -> None:
        await asyncio.to_thread(self._child.sendline, line)

    async def keys(self, keys: str) -> None:
        """Keys as typed, without Enter (`UP`, say)."""
        await asyncio.to_thread(self._child.send, keys)

    async def interrupt(self) -> None:
        """Ctrl-C, as the terminal sends it (SIGINT to the foreground process)."""
        await asyncio.to_thread(self._child.sendintr)

    async def leave_with_ctrl_d(self, timeout: float = TIMEOUT) -> int:
        """Ctrl-D at the prompt, again each second until the process exits; its exit status.

        The prompt is drawn before `input()` hands the terminal to readline. A Ctrl-D that
        arrives in between is the line discipline's end-of-file mark, which readline's switch
        to its own mode drops (typed characters stay queued; that mark does not). A person is
        never that fast; the test is."""
        return await asyncio.to_thread(self._exit_status, timeout, EOF_EVERY_SECONDS)

    async def leave_with_ctrl_c(self, timeout: float = TIMEOUT) -> int:
        """Ctrl-C at the prompt, again each second until the process exits; its exit status.

        A SIGINT that lands after the prompt is drawn but before readline waits for input sets
        Python's pending-signal flag, which CPython's readline only looks at when its `select`
        is interrupted: it waits for the next key. As with Ctrl-D, a person is never that
        fast, and the next Ctrl-C leaves."""
        return await asyncio.to_thread(self._exit_status, timeout, EOF_EVERY_SECONDS, "intr")

    def _exit_status(self, timeout: float, every: float | None = None, key: str = "eof") -> int:
        deadline = time.monotonic() + timeout
        next_key = time.monotonic()
        while self._child.isalive():
            if time.monotonic() > deadline:
                raise AssertionError(f"still running after {timeout} s; shown:\n{self.shown}")
            if every is not None and time.monotonic() >= next_key:
                with contextlib.suppress(OSError):  # it exited meanwhile
                    self._child.sendintr() if key == "intr" else self._child.sendeof()
                next_key = time.monotonic() + every
            try:
                self._raw += self._child.read_nonblocking(65536, timeout=0.1)
            except (pexpect.TIMEOUT, pexpect.EOF):
                pass
        self._child.close()
        status = self._child.exitstatus
        assert status is not None, f"killed by signal {self._child.signalstatus}"
        return int(status)

    async def exit_status(self, timeout: float = TIMEOUT) -> int:
        return await asyncio.to_thread(self._exit_status, timeout)

    def close(self) -> None:
        if self._child.isalive():
            self._child.terminate(force=True)


async def run_perdure(*args: str) -> tuple[int, str, str]:
    """`perdure …` as a script runs it (no terminal): exit status, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        PERDURE,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=client_env(),
    )
    async with asyncio.timeout(TIMEOUT):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()
