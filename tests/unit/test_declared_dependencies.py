"""Every third-party module the package imports comes from a distribution `pyproject.toml`
declares: an install of Perdure alone brings all it needs (docs/development.md)."""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES: list[str] = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    names = (
        re.split(r"[\s<>=!~\[;]", spec, maxsplit=1)[0]
        for spec in PYPROJECT["project"]["dependencies"]
    )
    return {_normalized(name) for name in names}


def _imported_modules() -> set[str]:
    found: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - set(PACKAGES)


def test_every_imported_module_comes_from_a_declared_distribution() -> None:
    distributions = packages_distributions()
    declared = _declared()
    undeclared = {
        module: distributions.get(module, ["(not installed)"])
        for module in sorted(_imported_modules())
        if not declared & {_normalized(d) for d in distributions.get(module, [])}
    }
    assert undeclared == {}
