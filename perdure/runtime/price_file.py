"""`PERDURE_PRICES`: the price table's JSON file, read and checked when settings load."""

import json
from pathlib import Path

from pydantic import ValidationError

from perdure.domain.prices import PriceTable

MAX_PRICE_FILE_BYTES = 1_000_000


def load_prices(path: Path) -> PriceTable:
    """The table in `path`; ValueError saying what is wrong with it."""
    try:
        if path.stat().st_size > MAX_PRICE_FILE_BYTES:
            raise ValueError(f"{path} is over {MAX_PRICE_FILE_BYTES} bytes")
        return PriceTable.model_validate(json.loads(path.read_text()))
    except OSError as error:
        raise ValueError(f"cannot read the price table {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"the price table {path} is not JSON: {error}") from None
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()
        )
        raise ValueError(f"the price table {path}: {problems}") from None
