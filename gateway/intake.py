"""The user messages a submission brings, checked at the boundary (turn_control/lifecycle.py
takes the submission in)."""

from pydantic_core import PydanticSerializationError

from gateway.errors import ApiError
from perdure.domain.ui import UIMessage


def checked_user_message(message: UIMessage, limit: int) -> UIMessage:
    """A user message with a text or file part, valid Unicode, without NUL, within `limit`."""
    if message.role != "user":
        raise ApiError(422, "unsupported_message", f"message {message.id!r} is not a user message")
    check_encoding(message, limit)
    for index, part in enumerate(message.parts):
        if part.type == "text" and not isinstance(part.field("text"), str):
            raise ApiError(
                422, "invalid_request", f"parts.{index}.text: a text part needs a string `text`"
            )
    if not any(p.type in ("text", "file") for p in message.parts):
        raise ApiError(422, "empty_message", "the message has no text or file part")
    return message


def check_encoding(message: UIMessage, limit: int) -> None:
    try:
        encoded = message.model_dump_json()
    except PydanticSerializationError:
        raise ApiError(
            422, "invalid_request", "the message is not valid Unicode (a lone surrogate)"
        ) from None
    if "\\u0000" in encoded:
        raise ApiError(422, "invalid_request", "the message contains a NUL character")
    size = len(encoded.encode())
    if size > limit:
        raise ApiError(
            413, "message_too_large", f"the message is {size} bytes; the limit is {limit}"
        )
