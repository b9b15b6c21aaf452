"""Follow-ups queued behind an interrupted turn (Trigger.dev's recovery boot)."""

from perdure.domain.recovery_boot import FollowUp, RecoveryBoot, default_boot, skipped_follow_ups
from perdure.domain.ui import UIMessage


def msg(message_id: str, role: str = "user", text: str = "x") -> UIMessage:
    return UIMessage.model_validate(
        {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}
    )


SETTLED = [msg("u0"), msg("a0", "assistant")]
FOLLOW_UPS = [
    FollowUp(submission_id="s2", message=msg("u2")),
    FollowUp(submission_id="s3", message=msg("u3")),
]


def test_the_default_chain_is_settled_then_the_in_flight_user_then_the_partial() -> None:
    boot = default_boot(SETTLED, msg("u1"), msg("a1", "assistant"), FOLLOW_UPS)

    assert [m.id for m in boot.chain] == ["u0", "a0", "u1", "a1"]
    assert boot.follow_ups == ["s2", "s3"]


def test_without_a_partial_the_chain_ends_with_the_in_flight_user() -> None:
    boot = default_boot(SETTLED, msg("u1"), None, [])

    assert [m.id for m in boot.chain] == ["u0", "a0", "u1"]
    assert boot.follow_ups == []


def test_follow_ups_left_out_of_a_plan_are_skipped() -> None:
    plan = RecoveryBoot(chain=[], follow_ups=["s3"])

    assert skipped_follow_ups(FOLLOW_UPS, plan) == ["s2"]
