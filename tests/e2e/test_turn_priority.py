"""Priority and fairness (docs/operations.md#priority-and-fairness): a person's turn runs at
interactive priority, in its tenant's fairness share with the tenant's weight; scheduled
prompts and fibers run behind it. Read back from Temporal's own description of the workflow."""

import uuid

import httpx
import pytest
from temporalio.api.common.v1 import Priority

from perdure.commands import cli
from perdure.domain.names import turn_workflow_id
from perdure.domain.turn_priority import INTERACTIVE_PRIORITY
from perdure.runtime.settings import ApiKeys
from perdure.testing.chat_client import send
from perdure.testing.stack import Stack
from storage.tenant_policies import set_policy
from tests.e2e.conftest import Gateway, unique


async def workflow_priority(stack: Stack, workflow_id: str) -> Priority:
    described = await stack.services.client.get_workflow_handle(workflow_id).describe()
    return described.raw_description.workflow_execution_info.priority


def submission_of(chunks: list[dict[str, object]]) -> str:
    start = next(chunk for chunk in chunks if chunk["type"] == "start")
    metadata = start["messageMetadata"]
    assert isinstance(metadata, dict)
    return str(metadata["submissionId"])


async def test_a_chat_turn_runs_at_interactive_priority_in_its_tenants_share(
    stack: Stack, gateway: Gateway
) -> None:
    tenant = unique("weighty")
    await set_policy(stack.services.db, tenant, fairness_weight=2.5)
    async with gateway("weighty-key", api_keys=ApiKeys.parse(f"weighty-key:{tenant}")) as client:
        streamed = await send(client, unique("chat"), "@count 2")

    priority = await workflow_priority(stack, turn_workflow_id(submission_of(streamed.chunks)))

    assert priority.priority_key == INTERACTIVE_PRIORITY
    assert priority.fairness_key == tenant
    assert priority.fairness_weight == 2.5


async def test_a_tenant_without_a_weight_gets_temporals_default_share(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    streamed = await send(http, f"plain-{uuid.uuid4().hex[:8]}", "@count 1")

    priority = await workflow_priority(stack, turn_workflow_id(submission_of(streamed.chunks)))

    assert priority.priority_key == INTERACTIVE_PRIORITY
    assert priority.fairness_key == "default"
    assert priority.fairness_weight == 0  # unset: the server's 1.0


async def test_a_changed_weight_holds_for_the_tenants_next_turn(
    stack: Stack, gateway: Gateway
) -> None:
    tenant = unique("weighty")
    await set_policy(stack.services.db, tenant, fairness_weight=0.5)
    async with gateway("weighty-key", api_keys=ApiKeys.parse(f"weighty-key:{tenant}")) as client:
        first = await send(client, unique("chat"), "@count 1")
        await set_policy(stack.services.db, tenant, fairness_weight=4)
        second = await send(client, unique("chat"), "@count 1")

    before = await workflow_priority(stack, turn_workflow_id(submission_of(first.chunks)))
    after = await workflow_priority(stack, turn_workflow_id(submission_of(second.chunks)))
    assert (before.fairness_weight, after.fairness_weight) == (0.5, 4)


def test_perdure_tenants_set_sets_a_weight_and_takes_it_back_to_the_default(
    fresh_cli_store: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as weighed:
        cli.main(["tenants", "set", "acme", "--weight", "2.5"])
    weighed_out = capsys.readouterr().out
    with pytest.raises(SystemExit) as listing:
        cli.main(["tenants", "list"])
    header, row = capsys.readouterr().out.splitlines()
    with pytest.raises(SystemExit) as reset:
        cli.main(["tenants", "set", "acme", "--weight", "default"])
    reset_out = capsys.readouterr().out

    assert weighed.value.code == listing.value.code == reset.value.code == 0
    assert "weight          2.5" in weighed_out
    assert header.split()[-1] == "WEIGHT" and row.split()[-1] == "2.5"
    assert "weight          default" in reset_out


@pytest.mark.parametrize("value", ["0", "-1", "1001", "heavy", "nan"])
def test_perdure_tenants_set_refuses_a_weight_out_of_temporals_range(
    value: str, fresh_cli_store: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        cli.main(["tenants", "set", "acme", "--weight", value])

    assert refused.value.code == 2
    assert "a fairness weight is a number from 0.001 to 1000" in capsys.readouterr().err
