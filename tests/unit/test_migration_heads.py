"""`storage.migrate.HEADS` names the revision graph's heads: a store at them is left alone at
start, so a migration missing from it would never be applied."""

from pathlib import Path

from alembic.config import Config
from alembic.script import ScriptDirectory

from storage.migrate import HEADS

MIGRATIONS = Path(__file__).parents[2] / "storage" / "migrations"


def test_the_known_heads_are_the_revision_graphs_heads() -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))

    heads = set(ScriptDirectory.from_config(config).get_heads())

    assert heads == HEADS, f"set storage.migrate.HEADS to {sorted(heads)}"
