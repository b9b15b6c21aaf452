"""A Perdure cluster of real processes for chaos tests: a Temporal dev server on a SQLite file,
`perdure worker`s and `perdure gateway`s sharing one store, the fake provider."""

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from perdure.temporal_dev import dev_server
from tests.fakeprovider.server import FakeProvider
from tests.processes import PerdureProcess, wait_healthy
from tests.stack import free_port

REPO = Path(__file__).parents[1]


class Cluster:
    def __init__(self, workdir: Path, fake: FakeProvider, database_url: str) -> None:
        self.workdir = workdir
        self.temporal_address = f"127.0.0.1:{free_port()}"
        self.temporal_ui_port = free_port()
        self.temporal_db = workdir / "temporal.db"
        self.processes: list[PerdureProcess] = []
        self.env = {
            **fake.env(),
            "PYTHONPATH": str(REPO),
            "PERDURE_AGENTS": "tests.agents",
            "PERDURE_MODEL": "openai:gpt-fake",
            "PERDURE_DATABASE_URL": database_url,
            "PERDURE_DATA_DIR": str(workdir),
            "PERDURE_TASK_QUEUE": f"chaos-{uuid.uuid4().hex[:8]}",
            "TEMPORAL_ADDRESS": self.temporal_address,
            "PERDURE_TEST_TOOL_RUNS": str(workdir / "tool-runs.txt"),
        }

    def temporal(self) -> contextlib.AbstractAsyncContextManager[object]:
        return dev_server(
            address=self.temporal_address,
            ui_port=self.temporal_ui_port,
            db_file=self.temporal_db,
            namespace="default",
        )

    def worker(self, **extra_env: str) -> PerdureProcess:
        process = PerdureProcess("worker", {**self.env, **extra_env}, self.workdir).start()
        self.processes.append(process)
        return process

    async def gateway(self) -> str:
        port = free_port()
        process = PerdureProcess("gateway", {**self.env, "PERDURE_PORT": str(port)}, self.workdir)
        self.processes.append(process.start())
        url = f"http://127.0.0.1:{port}"
        await wait_healthy(url, process)
        self.last_gateway = process
        return url

    def tool_runs(self) -> list[str]:
        path = Path(self.env["PERDURE_TEST_TOOL_RUNS"])
        return path.read_text().splitlines() if path.exists() else []

    def logs(self) -> str:
        return "\n".join(f"--- {p.command}\n{p.output()[-4000:]}" for p in self.processes)

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


@contextlib.asynccontextmanager
async def running_cluster(
    workdir: Path, fake: FakeProvider, database_url: str
) -> AsyncIterator[Cluster]:
    cluster = Cluster(workdir, fake, database_url)
    try:
        yield cluster
    finally:
        cluster.stop()
