"""The tree's naming conventions (docs/architecture.md, "Packages"), kept by the suite."""

import importlib
import inspect
import pkgutil

from pydantic import BaseModel
from sqlmodel import SQLModel

import gateway.routes
import storage


def _modules(package: object) -> list[object]:
    path = package.__path__  # type: ignore[attr-defined]
    prefix = package.__name__ + "."  # type: ignore[attr-defined]
    return [importlib.import_module(info.name) for info in pkgutil.iter_modules(path, prefix)]


def test_every_store_table_class_is_named_for_its_row() -> None:
    _modules(storage)  # every table is registered once its module is imported
    tables = [mapper.class_ for mapper in SQLModel._sa_registry.mappers]

    assert tables
    assert [table.__name__ for table in tables if not table.__name__.endswith("Row")] == []


def test_routes_define_no_request_or_response_bodies() -> None:
    defined = [
        f"{module.__name__}.{name}"  # type: ignore[attr-defined]
        for module in _modules(gateway.routes)
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and issubclass(value, BaseModel)
        and value.__module__ == module.__name__  # type: ignore[attr-defined]
    ]

    assert defined == []
