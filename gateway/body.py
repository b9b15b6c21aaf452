"""Read a request body with a hard size cap, and parse it as JSON."""

import copy
import json
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from gateway.errors import ApiError

M = TypeVar("M", bound=BaseModel)


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


def validated(model: type[M], payload: object) -> M:
    """`payload` as `model`, or a 422 naming each invalid field."""
    try:
        return model.model_validate(payload)
    except ValidationError as error:
        problems = [
            {"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
            for e in error.errors(include_url=False)
        ]
        summary = "; ".join(f"{p['field'] or 'body'}: {p['message']}" for p in problems[:5])
        raise ApiError(422, "invalid_request", summary, problems=problems) from error


def inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its `$defs` references replaced by the definitions (no recursion here):
    references to `$defs` do not resolve inside the OpenAPI document."""
    definitions = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str) and reference.startswith("#/$defs/"):
                return resolve(copy.deepcopy(definitions[reference.removeprefix("#/$defs/")]))
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


def json_body(model: type[BaseModel], description: str) -> dict[str, Any]:
    """The OpenAPI request body of a route that reads its body itself (to cap its size)."""
    return {
        "required": True,
        "description": description,
        "content": {
            "application/json": {"schema": inlined(model.model_json_schema(by_alias=True))}
        },
    }
