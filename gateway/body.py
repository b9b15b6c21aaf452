"""Read a request body with a hard size cap, and parse it as JSON."""

import json
from typing import Any

from fastapi import Request

from gateway.errors import ApiError


async def read_json(request: Request, *, limit: int) -> Any:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "body_too_large", f"the request body is over {limit} bytes")
    body = bytearray()
    async for piece in request.stream():
        body.extend(piece)
        if len(body) > limit:
            raise ApiError(413, "body_too_large", f"the request body is over {limit} bytes")
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ApiError(
            400, "malformed_json", f"the request body is not valid JSON: {error}"
        ) from None
