"""The workspace's cost: the files API on each store, a content in its row against one in the
blob directory, and a turn whose model calls the workspace tools.

    .venv/bin/python -m bench.workspace [--rounds 40] [--stores sqlite,postgres]

Real processes: `perdure worker` + `perdure gateway`, a Temporal dev server, the fake
provider. Per store and size: `PUT` and `GET` of one file, p50 / p95 over `--rounds`, with
the blob directory off (every content in its row) and on (`PERDURE_WORKSPACE_BLOB_MIN_BYTES`
256 KiB); then turns that write, read and grep a file through the tools against turns that
answer without a tool, time from sending to the stream's end, p50.
"""

import argparse
import asyncio
import json
import time
import uuid
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx

from bench.latency import percentile
from bench.split import split_stack
from perdure.testing.chat_client import send
from perdure.testing.databases import database_url, postgres_available
from perdure.testing.fakeprovider.server import FakeProvider

SIZES = {"1 KB": 1_000, "100 KB": 100_000, "1 MB": 1_000_000}
BLOB_MIN_BYTES = 262_144


def content_of(size: int) -> bytes:
    line = b"0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ\n"
    return (line * (size // len(line) + 1))[:size]


def p50_p95(values: list[float], digits: int) -> str:
    return f"{percentile(values, 50):.{digits}f} / {percentile(values, 95):.{digits}f}"


def tool(name: str, **arguments: object) -> str:
    return f"@tool {name} {json.dumps(arguments)}"


async def files_api(http: httpx.AsyncClient, chat: str, rounds: int) -> list[str]:
    rows = []
    for label, size in SIZES.items():
        content = content_of(size)
        puts, gets = [], []
        for n in range(rounds):
            url = f"/v1/sessions/{chat}/files/f{n % 4}-{size}.txt"
            started = time.perf_counter()
            put = await http.put(url, content=content)
            puts.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            got = await http.get(url)
            gets.append((time.perf_counter() - started) * 1000)
            assert put.status_code in (200, 201) and got.content == content, put.text
        rows.append(f"{label} | {p50_p95(puts, 1)} | {p50_p95(gets, 1)}")
    return rows


async def turns(http: httpx.AsyncClient, rounds: int) -> tuple[str, str]:
    plain, tools = [], []
    for _ in range(rounds):
        chat = f"ws-bench-{uuid.uuid4().hex[:10]}"
        started = time.perf_counter()
        await send(http, chat, "@count 3", agent="workspace")
        plain.append((time.perf_counter() - started) * 1000)
        steps = [
            tool("write_file", path="notes.md", content="alpha\nbeta\n" * 50),
            tool("read_file", path="notes.md", start_line=1, end_line=10),
            tool("grep", pattern="^beta$"),
        ]
        started = time.perf_counter()
        await send(http, chat, "\n".join(steps), agent="workspace")
        tools.append((time.perf_counter() - started) * 1000)
    return p50_p95(plain, 0), p50_p95(tools, 0)


async def one_store(fake: FakeProvider, workdir: Path, store: str, rounds: int) -> list[str]:
    rows = []
    for blobs in (False, True):
        env = (
            {
                "PERDURE_WORKSPACE_BLOB_DIR": str(workdir / "blobs"),
                "PERDURE_WORKSPACE_BLOB_MIN_BYTES": str(BLOB_MIN_BYTES),
            }
            if blobs
            else {}
        )
        where = "blob directory ≥ 256 KiB" if blobs else "rows only"
        home = workdir / f"{store}-{'blobs' if blobs else 'rows'}"
        home.mkdir()
        with database_url(store, home) as url:
            async with (
                split_stack(fake, home, url, name=store, extra_env=env) as stack,
                httpx.AsyncClient(base_url=stack.url, timeout=120) as http,
            ):
                chat = f"ws-bench-{uuid.uuid4().hex[:10]}"
                await send(http, chat, "@count 1", agent="workspace")
                for row in await files_api(http, chat, rounds):
                    rows.append(f"| {store} | {where} | {row} |")
                    print(rows[-1], flush=True)
                if not blobs:
                    plain, tools = await turns(http, max(10, rounds // 2))
                    print(
                        f"{store}: turn without tools {plain} ms, with 3 workspace tools {tools} ms"
                    )
                    rows.append(f"| {store} | turns (ms) p50 / p95 | no tool {plain} | "
                                f"write + read + grep {tools} |")  # fmt: skip
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.workspace", description=__doc__)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--stores", default="sqlite,postgres")
    args = parser.parse_args()
    rows = ["| store | contents | size | PUT (ms) p50 / p95 | GET (ms) p50 / p95 |",
            "|---|---|---|---|---|"]  # fmt: skip
    with FakeProvider() as fake, TemporaryDirectory() as tmp:
        for store in [s.strip() for s in args.stores.split(",") if s.strip()]:
            if store == "postgres" and postgres_available() is not None:
                print(f"skipping postgres: {postgres_available()}")
                continue
            (Path(tmp) / store).mkdir()
            rows += await one_store(fake, Path(tmp) / store, store, args.rounds)
    print()
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
