"""The Temporal worker: turn and reconciler workflows with the turn activities."""

from datetime import timedelta

from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.providers import provider_for
from activities.turn import TurnActivities
from perdure.agents_registry import AgentRegistry
from runtime.services import Services
from workflows import ReconcilerWorkflow, TurnWorkflow


def build_worker(services: Services, agents: AgentRegistry) -> Worker:
    activities = TurnActivities(
        db=services.db,
        bus=services.bus,
        agents=agents,
        default_model=services.settings.model,
        client=services.client,
        task_queue=services.settings.task_queue,
        provider_for=provider_for,
    )
    return Worker(
        services.client,
        task_queue=services.settings.task_queue,
        workflows=[TurnWorkflow, ReconcilerWorkflow],
        activities=[
            activities.model_step,
            activities.run_tool,
            activities.finish_turn,
            activities.reconcile,
        ],
        # Cancellation reaches an activity with a heartbeat response: a short throttle keeps
        # "stop" prompt. Liveness is bounded separately by the heartbeat timeout.
        max_heartbeat_throttle_interval=timedelta(milliseconds=500),
        default_heartbeat_throttle_interval=timedelta(milliseconds=500),
        max_concurrent_activities=200,
        # A workflow task waits this long on a dead worker's sticky queue before any worker
        # may take it. Turn histories are O(steps) and replay in milliseconds, so a short wait
        # costs nothing and a turn recovered from a killed worker is not held up 10 s.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        workflow_runner=SandboxedWorkflowRunner(
            # domain is pure pydantic models and functions; sharing it avoids re-importing
            # pydantic in every workflow sandbox.
            restrictions=SandboxRestrictions.default.with_passthrough_modules(
                "domain", "pydantic", "pydantic_core"
            )
        ),
    )
