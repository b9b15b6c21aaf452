"""Steering messages in an answer's log: a user message sent with the `steer` strategy joins
the running turn as a `data-steer` part, written at a step boundary. The model sees it as a
user turn at that point (perdure/domain/conversation.py); clients see it where it joined."""

from typing import Any

from perdure.domain.ui import Chunk, UIMessage

STEER_PART = "data-steer"
"""`{"type": "data-steer", "id": <message id>, "data": {submissionId, message}}`."""

JOINED_REASON = "joined the running turn of submission {running}"
"""Why a steering submission ends without a turn of its own (its `error`, its stream's abort
reason): the turn it joined answers it."""

DROPPED_REASON = "dropped by a stop (dropSteering)"


def steer_chunks(submission_id: str, messages: list[dict[str, Any]]) -> list[Chunk]:
    """One part per user message of the steering submission, in order."""
    return [
        {
            "type": STEER_PART,
            "id": str(message["id"]),
            "data": {
                "submissionId": submission_id,
                "message": {
                    "id": str(message["id"]),
                    "role": "user",
                    "parts": list(message.get("parts") or []),
                },
            },
        }
        for message in messages
    ]


def steer_text(part: dict[str, Any]) -> str:
    """The text of a `data-steer` part's message."""
    data = part.get("data")
    message = data.get("message") if isinstance(data, dict) else None
    return UIMessage.model_validate(message).text() if isinstance(message, dict) else ""


def steered_submissions(chunks: list[Chunk]) -> list[str]:
    """The steering submissions whose messages the log holds, in the order they joined."""
    found: dict[str, None] = {}
    for chunk in chunks:
        data = chunk.get("data")
        if chunk.get("type") == STEER_PART and isinstance(data, dict):
            found[str(data.get("submissionId"))] = None
    return list(found)
