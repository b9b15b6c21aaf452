"""The Temporal worker: turn and reconciler workflows with the turn activities."""

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

from temporalio import activity
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    PollerBehaviorAutoscaling,
    Worker,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.admission import AdmitDebouncedActivity
from activities.fiber import serve_fibers
from activities.finish import FinishTurnActivity, TurnFinisher
from activities.mcp_toolbox import McpToolbox, import_mcp_sdk
from activities.model_step import ModelStepActivity
from activities.parking import ParkTurnActivity, ResumeTurnActivity
from activities.prompt_schedules import PromptScheduleActivity
from activities.providers import import_adapters, provider_for
from activities.reconcile import ReconcileActivity
from activities.sub_agents import SubAgentActivities
from activities.tool_call import ToolCallActivity
from activities.turn_tools import ToolSources
from activities.workspace_tools import WorkspaceTools
from perdure.agents_registry import AgentRegistry
from perdure.runtime.services import Services
from perdure.runtime.settings import Settings
from perdure.telemetry.log_context import LogContextInterceptor
from perdure.turn_control.lifecycle import SubmissionLifecycle
from workflows import ReconcilerWorkflow, TurnWorkflow
from workflows.fiber import FiberWorkflow
from workflows.prompt_schedules import ScheduledPromptWorkflow

log = logging.getLogger("perdure.worker")

MAX_CONCURRENT_ACTIVITIES = 1000
POLLERS_MAX = 20


class ActivityTracker(Interceptor):
    """Counts the activities this worker runs, and those a shutdown handed over: still running
    when the grace period ended, cancelled by the SDK with reason *worker shutdown*, which
    Temporal records as a retryable `WorkerShutdown` failure and retries on another worker."""

    def __init__(self) -> None:
        self.running = 0
        self.handed_over = 0
        self.timed_out = 0

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Tracked(next, self)


class _Tracked(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, tracker: ActivityTracker) -> None:
        super().__init__(next)
        self._tracker = tracker

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        self._tracker.running += 1
        try:
            return await self.next.execute_activity(input)
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is not None and (details.timed_out or details.not_found):
                # Temporal gave up on this attempt (its heartbeats arrived too late) and has
                # already scheduled the next one, which continues the answer.
                self._tracker.timed_out += 1
                heartbeat_timeout = activity.info().heartbeat_timeout
                _log_attempt(
                    f"{'timed out' if details.timed_out else 'was no longer known'} at Temporal "
                    f"(heartbeat timeout {heartbeat_timeout}); the next attempt takes over"
                )
            elif details is not None and details.worker_shutdown:
                self._tracker.handed_over += 1
                _log_attempt(
                    "did not finish within the shutdown grace period; handed over: Temporal "
                    "retries it on another worker"
                )
            raise
        finally:
            self._tracker.running -= 1


def _log_attempt(what: str) -> None:
    """A warning about the running activity's attempt: which activity of which turn, and `what`."""
    info = activity.info()
    log.warning(
        "%s of %s (attempt %d) %s", info.activity_type, info.workflow_id, info.attempt, what
    )


def import_turn_dependencies(agents: AgentRegistry, settings: Settings) -> None:
    """Import, before the worker polls, the SDKs its agents' turns use (their models'
    providers, MCP): imported by a turn, each would hold the event loop that every running
    chat shares for a second or more."""
    import_adapters(agents.models(settings.model), settings.provider_config())
    if agents.use_mcp():
        import_mcp_sdk()


def turn_activities(services: Services, agents: AgentRegistry) -> list[Callable[..., Any]]:
    """One activity object per role: model step, tool call, finish, reconcile."""
    import_turn_dependencies(agents, services.settings)
    db, bus, client = services.db, services.bus, services.client
    task_queue = services.settings.task_queue
    lifecycle = SubmissionLifecycle(
        db,
        client,
        task_queue=task_queue,
        bus=bus,
        intake_width=services.settings.intake_concurrency,
    )
    mcp = McpToolbox()  # the process's connections to its agents' MCP servers
    services.closers.append(mcp.close)
    finisher = TurnFinisher(db=db, bus=bus, agents=agents, lifecycle=lifecycle, tasks=mcp)
    toolbox = ToolSources(
        mcp=mcp,
        workspace=WorkspaceTools(
            db=db,
            limits=services.settings.workspace_limits(),
            blobs=services.settings.workspace_blobs(),
        ),
    )
    model = ModelStepActivity(
        toolbox=toolbox,
        db=db,
        agents=agents,
        lifecycle=lifecycle,
        # The process's one log writer: the model steps of every chat hand their chunks to it
        # and it commits them together, one transaction per flush (storage/log_appender.py).
        appender=services.appender,
        default_model=services.settings.model,
        # The provider keys and settings were read once, with every other setting.
        provider_for=partial(provider_for, config=services.settings.provider_config()),
    )
    sub_agents = SubAgentActivities(db=db, bus=bus, agents=agents, lifecycle=lifecycle)
    return [
        model.model_step,
        ToolCallActivity(db=db, bus=bus, agents=agents, toolbox=toolbox).run_tool,
        ParkTurnActivity(db=db, bus=bus, agents=agents, toolbox=toolbox).park_turn,
        ResumeTurnActivity(db=db, bus=bus, agents=agents, toolbox=toolbox).resume_turn,
        AdmitDebouncedActivity(db=db).admit_debounced,
        sub_agents.start_sub_turn,
        sub_agents.relay_sub_turn,
        FinishTurnActivity(finisher).finish_turn,
        ReconcileActivity(
            db=db,
            client=client,
            task_queue=task_queue,
            lifecycle=lifecycle,
            finisher=finisher,
            chunk_retention=services.settings.chunk_retention(),
            blobs=services.settings.workspace_blobs(),
        ).reconcile,
        PromptScheduleActivity(db=db, lifecycle=lifecycle, task_queue=task_queue).fire_schedule,
    ]


def build_worker(
    services: Services, agents: AgentRegistry, tracker: ActivityTracker | None = None
) -> Worker:
    fibers = serve_fibers(
        db=services.db,
        client=services.client,
        task_queue=services.settings.task_queue,
        agents=agents,
    )
    return Worker(
        services.client,
        task_queue=services.settings.task_queue,
        workflows=[TurnWorkflow, ReconcilerWorkflow, ScheduledPromptWorkflow, FiberWorkflow],
        activities=[*turn_activities(services, agents), *fibers.activities],
        interceptors=[
            *([tracker] if tracker is not None else []),
            fibers.interceptor,
            # Log lines of an activity carry its session and submission ids.
            LogContextInterceptor(),
        ],
        # Cancellation reaches an activity with a heartbeat response: a short throttle keeps
        # "stop" prompt. Liveness is bounded separately by the heartbeat timeout.
        max_heartbeat_throttle_interval=timedelta(milliseconds=500),
        default_heartbeat_throttle_interval=timedelta(milliseconds=500),
        # Model steps and tools mostly wait on the network: hundreds at once cost little, and
        # every streaming answer holds one slot for its whole step.
        max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
        # Chats that start together arrive as a burst of tasks: let the pollers scale with it.
        workflow_task_poller_behavior=PollerBehaviorAutoscaling(maximum=POLLERS_MAX),
        activity_task_poller_behavior=PollerBehaviorAutoscaling(maximum=POLLERS_MAX),
        # On shutdown the worker stops polling at once and its running activities get this
        # long to finish; then the SDK cancels them and Temporal retries each on another
        # worker (a model step continues the same answer through the recovery gate).
        graceful_shutdown_timeout=timedelta(seconds=services.settings.worker_shutdown_grace),
        # A workflow task waits this long on a dead worker's sticky queue before any worker
        # may take it. Turn histories are O(steps) and replay in milliseconds, so a short wait
        # costs nothing and a turn recovered from a killed worker is not held up 10 s.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        workflow_runner=SandboxedWorkflowRunner(
            # perdure.domain is pure pydantic models and functions; sharing it (and the SDK
            # package it sits in) avoids re-importing pydantic in every workflow sandbox.
            restrictions=SandboxRestrictions.default.with_passthrough_modules(
                "perdure", "pydantic", "pydantic_core"
            )
        ),
    )
