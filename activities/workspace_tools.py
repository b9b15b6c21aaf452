"""The built-in tools over a session's workspace (docs/workspace.md): read_file, write_file,
edit_file, list_files, find_files, grep, delete_file. Each call runs in the `perdure.run_tool`
activity like any tool's.

A turn changes a file only at the version it last saw (read or left): `write_file` over a
file the turn never read, or a change after another turn's, is a conflict the model is told
about, never a silent overwrite. A change is recorded with its tool call's id, so a retried
call (a worker that died after the commit) answers the same and changes nothing again.
"""

import asyncio
import difflib
import fnmatch
import json
import re
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perdure.agent import Agent
from perdure.domain.conversation import ToolSpec
from perdure.domain.workspace_rules import (
    CHANGING_TOOLS,
    WORKSPACE_TOOLS,
    WorkspaceLimits,
    chosen_tools,
)
from perdure.tools import DEFAULT_WAIT_TIMEOUT, Tool, ToolArgumentsError, ToolContext
from storage.db import Database
from storage.errors import FileNotFound, StoreError
from storage.sessions import root_session_id
from storage.workspace_blobs import BlobDirectory
from storage.workspaces import (
    ABSENT,
    change_file,
    list_files,
    note_seen,
    read_file,
    read_files,
    seen_version,
)

DIFF_LINES = 40
"""Lines of a change's diff in its result (the chat page and `perdure chat` show it)."""
GREP_MATCHES = 200
GREP_LINE_CHARS = 300
GREP_SECONDS = 5.0
"""A pattern is matched in a process of its own, killed past this: a regular expression can
take exponential time, and the worker's event loop is every chat's."""


class WorkspaceToolError(Exception):
    """What the model is told instead of a result (a tool error)."""


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Read(_Arguments):
    path: str = Field(description="The file's name in the workspace, e.g. src/app.py")
    start_line: int | None = Field(default=None, ge=1, description="First line (1-based)")
    end_line: int | None = Field(default=None, ge=1, description="Last line, included")


class _Write(_Arguments):
    path: str
    content: str = Field(description="The whole new content of the file")


class _Edit(_Arguments):
    path: str
    old_text: str = Field(min_length=1, description="Exact text that occurs once in the file")
    new_text: str = Field(description="What replaces it")


class _List(_Arguments):
    prefix: str = Field(default="", description="Only files whose name starts with this")


class _Find(_Arguments):
    pattern: str = Field(
        min_length=1, description="A glob over whole names: * and ? match any characters, / too"
    )


class _Grep(_Arguments):
    pattern: str = Field(min_length=1, description="A Python regular expression")
    glob: str = Field(default="*", description="Only in files whose name matches this glob")


class _Delete(_Arguments):
    path: str


DESCRIPTIONS = {
    "read_file": "Read a text file of the workspace, or some of its lines; gives its version.",
    "write_file": "Write a file whole: a new file, or one you read in this turn.",
    "edit_file": "Replace one exact occurrence of old_text in a file you read in this turn.",
    "list_files": "List the workspace's files with their sizes and versions.",
    "find_files": "Find the workspace's files whose names match a glob.",
    "grep": "Search the workspace's text files for a regular expression; path:line: text.",
    "delete_file": "Delete a file of the workspace.",
}
ARGUMENTS: dict[str, type[_Arguments]] = {
    "read_file": _Read,
    "write_file": _Write,
    "edit_file": _Edit,
    "list_files": _List,
    "find_files": _Find,
    "grep": _Grep,
    "delete_file": _Delete,
}


def _spec(name: str) -> ToolSpec:
    schema = ARGUMENTS[name].model_json_schema()
    schema.pop("title", None)
    return ToolSpec(name=name, description=DESCRIPTIONS[name], parameters=schema)


SPECS = {name: _spec(name) for name in WORKSPACE_TOOLS}
"""Built once: a JSON schema costs milliseconds, and every model step sends the specs."""


def offered_names(agent: Agent) -> tuple[str, ...]:
    return chosen_tools(agent.name, agent.workspace_tools, WORKSPACE_TOOLS, "workspace_tools")


def approved_names(agent: Agent) -> tuple[str, ...]:
    return chosen_tools(agent.name, agent.workspace_approval, CHANGING_TOOLS, "workspace_approval")


@dataclass(frozen=True)
class WorkspaceTool:
    """One built-in tool, as the model sees it (a `perdure.tools.Tool`)."""

    workspace: "WorkspaceTools"
    name: str
    needs_approval: bool
    idempotent: bool = True
    """Changes are exactly once by the call's id: a retry is safe."""
    approval_timeout: timedelta = DEFAULT_WAIT_TIMEOUT

    @property
    def spec(self) -> ToolSpec:
        return SPECS[self.name]

    async def approval_needed(self, arguments: dict[str, Any], context: ToolContext) -> bool:
        return self.needs_approval

    async def invoke(self, owner: object, arguments: dict[str, Any], context: ToolContext) -> Any:
        try:
            parsed = ARGUMENTS[self.name].model_validate(arguments)
        except ValidationError as error:
            raise ToolArgumentsError(
                f"invalid arguments for {self.name}: {error.errors(include_url=False)}"
            ) from error
        try:
            return await self.workspace.run(self.name, parsed, context)
        except StoreError as error:
            raise WorkspaceToolError(str(error)) from None
        except ValueError as error:  # a bad path, a pattern that does not compile
            raise WorkspaceToolError(str(error)) from None


@dataclass(frozen=True)
class WorkspaceTools:
    """Per worker process: the store and the bounds every workspace tool works within."""

    db: Database
    limits: WorkspaceLimits
    blobs: BlobDirectory | None = None

    def for_agent(self, agent: Agent) -> dict[str, Tool]:
        approved = set(approved_names(agent))
        return {
            name: WorkspaceTool(self, name, needs_approval=name in approved)
            for name in offered_names(agent)
        }

    async def run(self, name: str, arguments: _Arguments, context: ToolContext) -> Any:
        # A sub-agent works in the workspace of the chat it descends from (Think's sub-agents
        # share their parent's); what a turn saw stays its own, by its submission.
        home = await root_session_id(self.db, session_id=context.session_id)
        return await _HANDLERS[name](self, arguments, replace(context, session_id=home))

    async def _read(self, arguments: _Read, context: ToolContext) -> Any:
        try:
            row = await read_file(
                self.db, session_id=context.session_id, path=arguments.path, blobs=self.blobs
            )
        except FileNotFound:
            await self._saw(context, arguments.path, ABSENT)
            raise
        text = _text(arguments.path, row.content)
        await self._saw(context, arguments.path, row.version)
        # With their line endings: the whole file reads back exactly as written (a model that
        # edits what it read and writes it back keeps the final newline).
        lines = text.splitlines(keepends=True)
        first = arguments.start_line or 1
        last = min(arguments.end_line or len(lines), len(lines))
        return {
            "path": arguments.path,
            "version": row.version,
            "totalLines": len(lines),
            "startLine": first,
            "endLine": last,
            "content": "".join(lines[first - 1 : last]),
        }

    async def _saw(self, context: ToolContext, path: str, version: int) -> None:
        await note_seen(
            self.db,
            session_id=context.session_id,
            submission_id=context.submission_id,
            path=path,
            version=version,
        )

    async def _write(self, arguments: _Write, context: ToolContext) -> Any:
        seen = await seen_version(self.db, submission_id=context.submission_id, path=arguments.path)
        content = arguments.content.encode()
        return await self._change(
            context, arguments.path, lambda _: content, ABSENT if seen is None else seen
        )

    async def _edit(self, arguments: _Edit, context: ToolContext) -> Any:
        seen = await seen_version(self.db, submission_id=context.submission_id, path=arguments.path)
        if seen is None or seen == ABSENT:
            raise WorkspaceToolError(f"read {arguments.path!r} in this turn before you edit it")

        def edited(before: bytes | None) -> bytes:
            text = _text(arguments.path, before or b"")
            found = text.count(arguments.old_text)
            if found == 0:
                raise WorkspaceToolError(f"old_text does not occur in {arguments.path!r}")
            if found > 1:
                raise WorkspaceToolError(
                    f"old_text occurs {found} times in {arguments.path!r}: include more of the "
                    "text around the one to change"
                )
            return text.replace(arguments.old_text, arguments.new_text, 1).encode()

        return await self._change(context, arguments.path, edited, seen)

    async def _delete(self, arguments: _Delete, context: ToolContext) -> Any:
        seen = await seen_version(self.db, submission_id=context.submission_id, path=arguments.path)
        expected = None if seen is None or seen == ABSENT else seen
        return await self._change(context, arguments.path, lambda _: None, expected)

    async def _change(
        self,
        context: ToolContext,
        path: str,
        change: Callable[[bytes | None], bytes | None],
        expected: int | None,
    ) -> Any:
        return await change_file(
            self.db,
            tenant_id=context.tenant_id,
            session_id=context.session_id,
            path=path,
            change=change,
            limits=self.limits,
            expected_version=expected,
            change_id=context.tool_call_id,
            seen_by=context.submission_id,
            describe=lambda before, after, version: _changed(path, before, after, version),
            blobs=self.blobs,
        )

    async def _list(self, arguments: _List, context: ToolContext) -> Any:
        listing = await list_files(self.db, session_id=context.session_id)
        return {
            "version": listing.version,
            "files": [
                {"path": f.path, "size": f.size, "version": f.version}
                for f in listing.files
                if f.path.startswith(arguments.prefix)
            ],
        }

    async def _find(self, arguments: _Find, context: ToolContext) -> Any:
        listing = await list_files(self.db, session_id=context.session_id)
        return [f.path for f in listing.files if fnmatch.fnmatchcase(f.path, arguments.pattern)]

    async def _grep(self, arguments: _Grep, context: ToolContext) -> Any:
        contents = await read_files(
            self.db,
            session_id=context.session_id,
            matching=lambda path: fnmatch.fnmatchcase(path, arguments.glob),
            blobs=self.blobs,
        )
        texts: dict[str, str] = {}
        for path, content in contents.items():
            try:
                texts[path] = content.decode()
            except UnicodeDecodeError:
                continue  # binary: no lines to search
        return await _grep_isolated(arguments.pattern, texts)


_HANDLERS: dict[str, Callable[[WorkspaceTools, Any, ToolContext], Awaitable[Any]]] = {
    "read_file": WorkspaceTools._read,
    "write_file": WorkspaceTools._write,
    "edit_file": WorkspaceTools._edit,
    "list_files": WorkspaceTools._list,
    "find_files": WorkspaceTools._find,
    "grep": WorkspaceTools._grep,
    "delete_file": WorkspaceTools._delete,
}


def _text(path: str, content: bytes) -> str:
    try:
        return content.decode()
    except UnicodeDecodeError:
        raise WorkspaceToolError(
            f"{path!r} is not UTF-8 text: read it over /v1/sessions/{{id}}/files"
        ) from None


def _changed(path: str, before: bytes | None, after: bytes | None, version: int) -> dict[str, Any]:
    """A change's result: its new version and a short unified diff."""
    return {
        "path": path,
        "version": version,
        "created": before is None,
        "deleted": after is None,
        "diff": _diff(path, before, after),
    }


def _diff(path: str, before: bytes | None, after: bytes | None) -> str:
    try:
        old = (before or b"").decode().splitlines(keepends=True)
        new = (after or b"").decode().splitlines(keepends=True)
    except UnicodeDecodeError:
        return "binary content changed"
    lines = list(
        difflib.unified_diff(
            old,
            new,
            fromfile="/dev/null" if before is None else f"a/{path}",
            tofile="/dev/null" if after is None else f"b/{path}",
            n=1,
        )
    )
    shown = "".join(line if line.endswith("\n") else f"{line}\n" for line in lines[:DIFF_LINES])
    if len(lines) > DIFF_LINES:
        shown += f"… {len(lines) - DIFF_LINES} more lines\n"
    return shown


_GREP_SCRIPT = f"""
import json, re, sys
request = json.load(sys.stdin)
pattern = re.compile(request["pattern"])
found, more = [], False
for path, text in request["texts"].items():
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.search(line):
            if len(found) == {GREP_MATCHES}:
                more = True
                break
            found.append(f"{{path}}:{{number}}: {{line[:{GREP_LINE_CHARS}]}}")
    if more:
        break
json.dump({{"matches": found, "truncated": more}}, sys.stdout)
"""


async def _grep_isolated(pattern: str, texts: dict[str, str]) -> Any:
    try:
        re.compile(pattern)
    except re.error as error:
        raise WorkspaceToolError(f"the pattern does not compile: {error}") from None
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-c",
        _GREP_SCRIPT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    request = json.dumps({"pattern": pattern, "texts": texts}).encode()
    try:
        async with asyncio.timeout(GREP_SECONDS):
            out, err = await process.communicate(request)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise WorkspaceToolError(
            f"the pattern took over {GREP_SECONDS:g} s to search the workspace: simplify it"
        ) from None
    if process.returncode != 0:
        raise WorkspaceToolError(f"the search failed: {err.decode(errors='replace')[-300:]}")
    return json.loads(out)
