"""The compose topology under deploy/ is consistent with the code it deploys. No test here can
pull its images (there is no container registry in CI), so what can be checked without them is
checked: every setting it passes exists, every service it waits for is defined, the image holds
every package, the balancer streams, and provider keys reach only the workers and the relay."""

import ast
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from perdure.runtime.settings import Settings

REPO = Path(__file__).parents[2]
DEPLOY = REPO / "deploy"
PERDURE_SERVICES = ("migrate", "temporal-setup", "admin", "worker", "gateway", "relay")
PROVIDER_KEYS = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}


def services() -> dict[str, dict[str, Any]]:
    compose: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yml").read_text())
    return compose["services"]


def settings_names() -> set[str]:
    return {field.alias or name for name, field in Settings.model_fields.items()}


def test_every_perdure_variable_in_the_topology_is_a_setting_perdure_reads() -> None:
    named = {
        name
        for service in PERDURE_SERVICES
        for name in services()[service]["environment"]
        if name.startswith(("PERDURE_", "TEMPORAL_"))
    }
    named |= {
        line.split("=", 1)[0].lstrip("# ").strip()
        for line in (DEPLOY / ".env.example").read_text().splitlines()
        if re.match(r"^#? ?PERDURE_[A-Z_]+=", line)
    }

    assert named - settings_names() == set()


def test_every_service_waited_for_is_defined() -> None:
    defined = services()
    waited = {name for service in defined.values() for name in service.get("depends_on", {})}

    assert waited - set(defined) == set()


def test_the_perdure_services_run_commands_that_exist() -> None:
    cli = (REPO / "perdure" / "commands" / "cli.py").read_text()
    for service in ("migrate", "temporal-setup", "worker", "gateway", "relay"):
        command = services()[service]["command"][0]
        assert f'"{command}"' in cli, service


def test_provider_keys_reach_only_the_workers_and_the_relay() -> None:
    for name, service in services().items():
        environment = set(service.get("environment", {}))
        if name in ("worker", "relay"):
            assert PROVIDER_KEYS <= environment
        else:
            assert not PROVIDER_KEYS & environment, name


def test_the_relay_is_reached_only_by_the_workers_and_gateways_with_the_shared_secret() -> None:
    relay = services()["relay"]

    assert "ports" not in relay  # not published outside the compose network
    assert "PERDURE_RELAY_SECRET" in relay["environment"]
    for name in ("worker", "gateway"):  # steps, and the gateways' head starts
        environment = services()[name]["environment"]
        assert environment["PERDURE_RELAY_URL"] == "http://relay:8300", name
        assert "PERDURE_RELAY_SECRET" in environment, name


def test_the_image_holds_every_package_of_the_wheel() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}

    assert "COPY . ." in (DEPLOY / "Dockerfile").read_text()
    assert set(packages) & ignored == set()


def test_the_balancer_streams_to_the_gateways_port_without_buffering() -> None:
    nginx = (DEPLOY / "nginx.conf").read_text()
    port = services()["gateway"]["environment"]["PERDURE_PORT"]

    assert f"server gateway:{port} resolve" in nginx
    assert "proxy_buffering off;" in nginx
    assert re.search(r"proxy_read_timeout (\d+)h;", nginx)


def test_the_example_agent_module_defines_an_agent() -> None:
    agents = services()["worker"]["environment"]["PERDURE_AGENTS"]
    module = (DEPLOY / ".env.example").read_text().split("PERDURE_AGENTS=", 1)[1].split()[0]
    tree = ast.parse((DEPLOY / "agents" / f"{module}.py").read_text())

    assert agents == "${PERDURE_AGENTS:-}"
    assert any(
        isinstance(node, ast.ClassDef) and any(getattr(b, "id", "") == "Agent" for b in node.bases)
        for node in tree.body
    )
