"""The `perdure` command imports only what the command it runs needs: the OpenAI and Anthropic
SDKs take over a second to import, the gateway's web app about as much, on every start of a
process that never uses them (`perdure gateway`, `relay`, `keys` and `chat` need no SDK; a
worker needs no web app)."""

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[2]


def imported_after(statement: str, modules: tuple[str, ...]) -> list[str]:
    """Which of `modules` a fresh interpreter has imported after `statement`."""
    probe = f"import sys; {statement}; print(sorted(m for m in {modules!r} if m in sys.modules))"
    imported = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    return list(ast.literal_eval(imported.stdout))


def test_importing_the_cli_imports_no_provider_sdk() -> None:
    assert imported_after("import perdure.commands.cli", ("openai", "anthropic", "httpx2")) == []


def test_a_worker_imports_no_web_framework() -> None:
    worker = "import perdure.commands.cli, perdure.runtime.worker"
    assert imported_after(worker, ("fastapi", "starlette", "gateway.app")) == []


def test_a_worker_serving_only_openai_models_imports_no_anthropic_sdk() -> None:
    worker = (
        "import perdure.commands.cli, perdure.runtime.worker; "
        "from activities.providers import ProviderConfig, provider_for; "
        "[provider_for(spec, ProviderConfig()) for spec in ('openai:m', 'openai-responses:m')]"
    )
    assert imported_after(worker, ("anthropic",)) == []


def test_an_anthropic_model_imports_its_sdk_when_first_resolved() -> None:
    resolved = (
        "from activities.providers import ProviderConfig, provider_for; "
        "provider_for('anthropic:claude-haiku-4-5', ProviderConfig())"
    )
    assert imported_after(resolved, ("anthropic",)) == ["anthropic"]


def worker_start_imports(agents: str, model: str) -> list[str]:
    """Which SDKs a worker for `agents` on default `model` has imported before its first turn."""
    start = (
        "from perdure.agents_registry import load_agents; "
        "from perdure.runtime.settings import Settings; "
        "from perdure.runtime.worker import import_turn_dependencies; "
        f"import_turn_dependencies(load_agents({agents!r}), "
        f"Settings.model_validate({{'PERDURE_MODEL': {model!r}}}))"
    )
    return imported_after(start, ("openai", "anthropic", "mcp"))


def test_a_worker_imports_its_agents_sdks_before_its_first_turn_not_during_it() -> None:
    assert worker_start_imports("tests.mcp_agents", "anthropic:claude-sonnet-4-6") == [
        "anthropic",
        "mcp",
        "openai",
    ]


def test_a_worker_imports_no_sdk_its_agents_do_not_use() -> None:
    assert worker_start_imports("", "openai:gpt-4.1-mini") == ["openai"]
