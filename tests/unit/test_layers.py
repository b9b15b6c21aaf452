"""Dependencies between Perdure's packages point one way (docs/architecture.md, "Packages")."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "domain",
    "perdure",
    "workflows",
    "storage",
    "turn_control",
    "activities",
    "runtime",
    "gateway",
    "commands",
    "telemetry",
}
ALLOWED: dict[str, set[str]] = {
    "domain": set(),
    "perdure": {"domain"},
    "workflows": {"domain"},
    "storage": {"domain"},
    "turn_control": {"domain", "storage"},
    "telemetry": {"domain", "storage"},
    "activities": {"domain", "perdure", "storage", "turn_control", "telemetry"},
    "runtime": {
        "domain",
        "perdure",
        "storage",
        "turn_control",
        "activities",
        "workflows",
        "telemetry",
    },
    "gateway": {"domain", "storage", "turn_control", "runtime", "telemetry"},
    "commands": PACKAGES,
}


def _top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _imported_packages(path: Path) -> set[str]:
    return _top_level_imports(path) & PACKAGES


def _violations(package: str) -> list[str]:
    allowed = ALLOWED[package] | {package}
    problems = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for imported in sorted(_imported_packages(path) - allowed):
            problems.append(f"{path.relative_to(ROOT)} imports {imported}")
    return problems


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_the_layers_below_it(package: str) -> None:
    assert _violations(package) == []


def test_the_gateway_never_loads_the_worker_assembly() -> None:
    """The gateway never runs user code or talks to a provider (DESIGN §2)."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "gateway").rglob("*.py")
        if "runtime.worker" in path.read_text()
    ]
    assert offenders == []


DETERMINISTIC_IMPORTS = {
    "asyncio",
    "contextlib",
    "copy",
    "dataclasses",
    "datetime",
    "json",
    "pydantic",
    "re",
    "temporalio",
    "typing",
    "domain",
    "workflows",
}
"""What workflow code (and the domain it runs) may import: no clock, randomness, threads or
I/O. The turn workflow runs outside Temporal's sandbox, so this list is its guard."""


@pytest.mark.parametrize("package", ["workflows", "domain"])
def test_workflow_code_imports_nothing_that_reads_clocks_or_does_io(package: str) -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for name in sorted(_top_level_imports(path) - DETERMINISTIC_IMPORTS)
    ]
    assert offenders == []
