"""The page the gateway serves is the one web/ builds, and serving it hides no API route."""

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from gateway.web import STATIC
from perdure.testing.stack import Stack
from tests.databases import skip_or_fail

WEB = Path(__file__).parents[2] / "web"


def _digests(directory: Path) -> dict[str, str]:
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def _run(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"


@pytest.mark.node
@pytest.mark.long
@pytest.mark.timeout(600)
def test_the_committed_bundle_is_what_the_sources_build_byte_for_byte(tmp_path: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        skip_or_fail("npm is not installed: the committed bundle cannot be rebuilt to compare")
        return
    source = tmp_path / "web"
    shutil.copytree(WEB, source, ignore=shutil.ignore_patterns("node_modules"))

    _run([npm, "ci", "--no-audit", "--no-fund"], cwd=source)
    _run([npm, "run", "build", "--", "--outDir", str(tmp_path / "built")], cwd=source)

    assert _digests(tmp_path / "built") == _digests(STATIC), (
        "gateway/static is not what web/ builds: run `make web` (docs/web.md)"
    )


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
async def test_the_page_is_served_at_the_root_beside_the_api(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.url) as http:
        page = await http.get("/")
        assets = re.findall(r'(?:src|href)="\./(assets/[^"]+)"', page.text)
        fetched = [await http.get(f"/{asset}") for asset in assets]
        api = [await http.get(path) for path in ("/healthz", "/v1/sessions", "/openapi.json")]
        docs = await http.get("/docs")
        no_route = await http.get("/api/no-such-route")
        no_asset = await http.get("/assets/no-such-file.js")

    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-cache"
    assert len(assets) == 2 and [response.status_code for response in fetched] == [200, 200]
    assert "immutable" in fetched[0].headers["cache-control"]
    assert [response.headers["content-type"] for response in api] == ["application/json"] * 3
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    assert no_route.status_code == 404 and no_route.json()["error"]["code"] == "not_found"
    assert no_asset.status_code == 404 and no_asset.json()["error"]["code"] == "not_found"
