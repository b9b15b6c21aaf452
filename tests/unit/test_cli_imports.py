"""The `perdure` command imports no provider SDK until a command that runs a worker needs one:
the OpenAI and Anthropic SDKs take over a second to import, on every `perdure gateway`,
`perdure relay`, `perdure keys` and `perdure chat` start."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[2]


def test_importing_the_cli_imports_no_provider_sdk() -> None:
    probe = (
        "import sys, perdure.commands.cli; "
        "print(sorted(m for m in ('openai', 'anthropic', 'httpx2') if m in sys.modules))"
    )
    imported = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert imported.stdout.strip() == "[]"
