"""Dependencies between Perdure's packages point one way (docs/architecture.md, "Packages")."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBPACKAGES = {"domain", "turn_control", "runtime", "commands", "telemetry", "testing", "relay"}
"""The layers inside `perdure/` (`perdure.domain`, …); its top-level modules are the SDK."""
PACKAGES = {"perdure", "workflows", "storage", "activities", "gateway"} | SUBPACKAGES
ALLOWED: dict[str, set[str]] = {
    "domain": set(),
    "perdure": {"domain"},
    "workflows": {"domain"},
    "storage": {"domain"},
    "turn_control": {"domain", "storage"},
    "telemetry": {"domain", "storage"},
    "relay": {"domain", "telemetry"},
    "activities": {"domain", "perdure", "storage", "turn_control", "telemetry"},
    "runtime": {
        "domain",
        "perdure",
        "storage",
        "turn_control",
        "activities",
        "workflows",
        "telemetry",
        "relay",
    },
    "gateway": {"domain", "storage", "turn_control", "runtime", "telemetry"},
    "commands": PACKAGES - {"testing"},
    "testing": PACKAGES,
}
"""`perdure.testing` (the stack, processes and fake provider the tests and benchmarks share)
may use everything; nothing else uses it."""


def _layer_of_module(module: str) -> str | None:
    """`perdure.domain.ui` → `domain`; `perdure.agent` → `perdure`; `storage.db` → `storage`."""
    parts = module.split(".")
    if parts[0] == "perdure":
        return parts[1] if len(parts) > 1 and parts[1] in SUBPACKAGES else "perdure"
    return parts[0] if parts[0] in PACKAGES else None


def _files_of(layer: str) -> list[Path]:
    if layer in SUBPACKAGES:
        return sorted((ROOT / "perdure" / layer).rglob("*.py"))
    if layer == "perdure":
        return sorted((ROOT / "perdure").glob("*.py"))
    return sorted((ROOT / layer).rglob("*.py"))


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _imported_packages(path: Path) -> set[str]:
    return {
        layer
        for module in _imported_modules(path)
        if (layer := _layer_of_module(module)) is not None
    }


def _violations(package: str) -> list[str]:
    allowed = ALLOWED[package] | {package}
    problems = []
    for path in _files_of(package):
        if "migrations" in path.parts:
            continue
        for imported in sorted(_imported_packages(path) - allowed):
            problems.append(f"{path.relative_to(ROOT)} imports {imported}")
    return problems


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_the_layers_below_it(package: str) -> None:
    assert _violations(package) == []


def test_the_gateway_never_loads_the_worker_assembly() -> None:
    """The gateway never runs user code or talks to a provider (docs/architecture.md)."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "gateway").rglob("*.py")
        if "perdure.runtime.worker" in path.read_text()
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
    "perdure.domain",
    "workflows",
}
"""What workflow code (and the domain it runs) may import: no clock, randomness, threads or
I/O. The turn workflow runs outside Temporal's sandbox, so this list is its guard."""


def _nondeterministic(module: str) -> bool:
    return not any(
        module == allowed or module.startswith(f"{allowed}.") for allowed in DETERMINISTIC_IMPORTS
    )


@pytest.mark.parametrize("package", ["workflows", "domain"])
def test_workflow_code_imports_nothing_that_reads_clocks_or_does_io(package: str) -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _files_of(package)
        for name in sorted(_imported_modules(path))
        if _nondeterministic(name)
    ]
    assert offenders == []
