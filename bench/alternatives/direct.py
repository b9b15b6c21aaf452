"""The floor: a gateway that calls the provider itself and relays its stream. No Temporal, no
store, no durability: whatever dies takes the answer with it.

    python -m bench.alternatives.direct gateway --port P      # OPENAI_BASE_URL: the provider

`POST /api/chat` takes an AI SDK chat request (the client sends the whole conversation, as
`useChat` does) and answers with the AI SDK UI message stream. When the model calls tools, the
gateway runs them in its own process and asks the model again with their outputs, until it
answers without a call.
"""

import argparse
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from bench.alternatives._common import (
    SSE_HEADERS,
    Completion,
    ToolRound,
    UIStream,
    add_health,
    chat_messages,
    provider_messages,
    serve,
    tool_output,
)


def create_app() -> FastAPI:
    app = FastAPI()
    add_health(app)

    @app.post("/api/chat")
    async def chat(request: Request) -> StreamingResponse:
        body: dict[str, Any] = await request.json()
        conversation = provider_messages(body["messages"])
        answer_id = uuid.uuid4().hex[:16]
        ui = UIStream(answer_id, f"direct-{answer_id}")

        async def events() -> AsyncIterator[str]:
            yield ui.opening()
            rounds: list[ToolRound] = []
            try:
                while True:
                    completion = Completion(chat_messages(conversation, rounds))
                    async for text in completion.deltas():
                        yield ui.delta(text)
                    answer = completion.answer()
                    if not answer.tool_calls:
                        break
                    outputs = [await tool_output(call) for call in answer.tool_calls]
                    rounds.append(ToolRound(answer.text, answer.tool_calls, outputs))
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
