"""Every operation the docs' route tables describe is in the OpenAPI document, with each
success status the docs give it: a reader of docs/ and a client generated from the spec see the
same API."""

import re
from pathlib import Path
from typing import Any

import pytest

from gateway.app import create_app
from perdure.runtime.settings import Settings

DOCS = Path(__file__).resolve().parents[2] / "docs"
ROW = re.compile(r"^\| `(GET|POST|PATCH|PUT|DELETE) (/[^`?\s]*)[^`]*`(.*)$")
SUCCESS = re.compile(r"(?<![\d.,])(2\d\d)(?![\d,])")


def _template(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path.rstrip("/"))


def _documented() -> list[tuple[str, str, str, frozenset[str]]]:
    """(document, method, path template, success statuses) of each route table row."""
    rows = []
    for document in sorted(DOCS.glob("*.md")):
        for line in document.read_text().splitlines():
            match = ROW.match(line)
            if match is None:
                continue
            method, path, rest = match.groups()
            if not path.startswith(("/api/", "/v1/")):
                continue
            answer = rest.split("|", 2)[1] if rest.count("|") >= 2 else rest
            statuses = frozenset(SUCCESS.findall(answer))
            rows.append((document.name, method, _template(path), statuses))
    return rows


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    document: dict[str, Any] = create_app(settings=Settings()).openapi()
    return document


def _operations(spec: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    return {
        (method.upper(), _template(path)): set(operation["responses"])
        for path, item in spec["paths"].items()
        for method, operation in item.items()
    }


def test_the_docs_describe_routes() -> None:
    assert len(_documented()) > 30  # the tables were found and read


@pytest.mark.parametrize(
    ("document", "method", "path", "statuses"),
    _documented(),
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_documented_answer_is_the_specs(
    spec: dict[str, Any], document: str, method: str, path: str, statuses: frozenset[str]
) -> None:
    operations = _operations(spec)
    assert (method, path) in operations, f"{document}: {method} {path} is not in the spec"
    declared = operations[(method, path)]
    assert statuses <= declared, f"{document}: {method} {path} answers {sorted(statuses)}"
