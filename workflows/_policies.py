"""Timeouts and retry policies per activity (data only).

Changing these affects only activities scheduled afterwards; running turns replay safely.
"""

from datetime import timedelta

from temporalio.common import RetryPolicy

from perdure.domain.policy import MAX_RECOVERY_ATTEMPTS

HEARTBEAT_TIMEOUT = timedelta(seconds=5)
"""How long a silent model or tool activity lives before Temporal retries it elsewhere: the
bound on noticing a dead worker. Activities heartbeat every second, so 5 s tolerates a few lost
heartbeats on a busy machine without mistaking a live worker for a dead one."""

MODEL_STEP_TIMEOUT = timedelta(minutes=10)
TOOL_TIMEOUT = timedelta(minutes=10)
FINISH_TIMEOUT = timedelta(seconds=30)
SUB_TURN_TIMEOUT = timedelta(days=7)
"""A sub-agent's turn, approvals it waits on included (as a turn started by the gateway)."""
SUB_TURN_RELAY_TIMEOUT = timedelta(hours=6)
"""Relaying a sub-agent's answer as it streams (a relay ends when the child waits)."""
PARKING_TIMEOUT = timedelta(seconds=30)
"""Parking and resuming a turn: a few store writes each."""

MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=MAX_RECOVERY_ATTEMPTS + 10,
)
"""Every retry is a recovery attempt, and the model step itself ends the turn when the agent's
RecoveryPolicy budget is spent (in a row, in total, in time). The attempt limit is only a
backstop above any policy (a bug in the gate must not retry for days); reaching it ends the turn
as exhausted. A short first interval keeps recovery after a dead worker near the heartbeat
timeout."""
IDEMPOTENT_TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
)
ONCE = RetryPolicy(maximum_attempts=1)
FINISH_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10)
)
"""Finishing never gives up: it is idempotent and the only way a session is released."""
PARKING_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=30,
)
"""Both are idempotent; after ~4 minutes of failures the turn ends with the error."""
