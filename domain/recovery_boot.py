"""Follow-ups sent while a turn was interrupted (Trigger.dev's recovery boot).

Perdure admits one submission per session at a time, so follow-ups wait as queued submissions
and are never spliced into the interrupted turn. The default chain the recovery continues is
`[…settled, first in-flight user, partial]`; the queued follow-ups then run as fresh turns in
the order they were sent. An agent's `on_recovery_boot` may change both.
"""

from pydantic import BaseModel, Field

from domain.ui import UIMessage


class FollowUp(BaseModel):
    submission_id: str
    message: UIMessage


class RecoveryBoot(BaseModel):
    chain: list[UIMessage]
    """The conversation the recovered turn continues from, oldest first, ending with the partial."""
    follow_ups: list[str] = Field(default_factory=list)
    """Queued submissions to run afterwards, in order; queued ones not listed are skipped."""


def default_boot(
    settled: list[UIMessage],
    in_flight_user: UIMessage,
    partial: UIMessage | None,
    queued: list[FollowUp],
) -> RecoveryBoot:
    chain = [*settled, in_flight_user]
    if partial is not None and partial.parts:
        chain.append(partial)
    return RecoveryBoot(chain=chain, follow_ups=[f.submission_id for f in queued])


def skipped_follow_ups(queued: list[FollowUp], plan: RecoveryBoot) -> list[str]:
    keep = set(plan.follow_ups)
    return [f.submission_id for f in queued if f.submission_id not in keep]
