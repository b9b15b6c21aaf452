"""Database URLs: one setting, an async driver for the app and a sync one for migrations."""

from pathlib import Path

from sqlalchemy.engine import URL, make_url


def default_sqlite_url(data_dir: Path) -> str:
    return f"sqlite:///{(data_dir / 'perdure.db').resolve()}"


def async_url(url: str) -> URL:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite")
    if parsed.get_backend_name() == "postgresql":
        return parsed.set(drivername="postgresql+psycopg")
    raise ValueError(f"unsupported database {parsed.drivername!r}: use sqlite:// or postgresql://")


def sync_url(url: str) -> URL:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return parsed.set(drivername="sqlite")
    return parsed.set(drivername="postgresql+psycopg")


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"
