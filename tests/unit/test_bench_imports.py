"""The benchmarks and the package never reach into `tests/`: what they share with the tests
(stacks, processes, the fake provider, the agents) lives in `perdure.testing`
(docs/testing.md, "What the tests and benchmarks share")."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTS_MODULE = re.compile(r"\btests\.[A-Za-z_]")
"""A module path into `tests/` (`tests.agents`) inside a string, such as a `PERDURE_AGENTS`
value; prose that ends a sentence on "tests." names no module."""


def reaches_into_tests(source: str) -> list[str]:
    """What `source` imports from `tests/` or names by module path, line by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value] if TESTS_MODULE.search(node.value) else []
        else:
            continue
        found += [
            f"{node.lineno}: {name!r}"
            for name in names
            if name == "tests" or TESTS_MODULE.search(name)
        ]
    return found


@pytest.mark.parametrize("folder", ["bench", "perdure"])
def test_nothing_imports_or_names_a_module_of_tests(folder: str) -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line in reaches_into_tests(path.read_text())
    ]
    assert offenders == []


def test_the_check_finds_imports_and_module_paths_but_not_prose() -> None:
    source = (
        "import tests.served\n"
        "from tests import agents\n"
        'AGENTS = "perdure.testing.agents.chat,tests.mcp_agents"\n'
        '"""Shared by the benchmarks and the tests. Not `pytests.x`."""\n'
    )
    assert reaches_into_tests(source) == [
        "1: 'tests.served'",
        "2: 'tests'",
        "3: 'perdure.testing.agents.chat,tests.mcp_agents'",
    ]
