"""The floor: a gateway that calls the provider itself and relays its stream. No Temporal, no
store, no durability: whatever dies takes the answer with it.

    python -m bench.alternatives.direct gateway --port P      # OPENAI_BASE_URL: the provider

`POST /api/chat` takes an AI SDK chat request (the client sends the whole conversation, as
`useChat` does) and answers with the AI SDK UI message stream.
"""

import argparse
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from bench.alternatives._common import (
    SSE_HEADERS,
    UIStream,
    add_health,
    provider_deltas,
    provider_messages,
    serve,
)


def create_app() -> FastAPI:
    app = FastAPI()
    add_health(app)

    @app.post("/api/chat")
    async def chat(request: Request) -> StreamingResponse:
        body: dict[str, Any] = await request.json()
        messages = provider_messages(body["messages"])
        answer = uuid.uuid4().hex[:16]
        ui = UIStream(answer, f"direct-{answer}")

        async def events() -> AsyncIterator[str]:
            yield ui.opening()
            try:
                async for text in provider_deltas(messages):
                    yield ui.delta(text)
            except Exception as error:  # the provider failed: nothing can take over
                yield ui.error(f"{type(error).__name__}: {error}")
                return
            yield ui.closing()

        return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["gateway"])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    serve(create_app(), args.port)


if __name__ == "__main__":
    main()
