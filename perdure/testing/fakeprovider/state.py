"""What the fake server remembers: the request log, delta counters and fault budgets.

Handlers run on the server's thread while tests read from theirs, so every change is locked.
"""

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from perdure.testing.fakeprovider.directives import Fault


@dataclass
class RecordedRequest:
    route: str
    """`chat.completions`, `responses`, `responses.retrieve`, `responses.cancel` or `messages`."""
    body: dict[str, Any]
    user_text: str
    started_at: float = field(default_factory=time.monotonic)
    first_delta_at: float | None = None
    """`time.monotonic()` when the first content delta was written to the socket."""
    deltas: int = 0
    delta_times: list[float] = field(default_factory=list)
    """`time.monotonic()` of every content delta written, in order."""
    status: int = 200

    def __getitem__(self, key: str) -> Any:
        """Dict-style access, so `request["first_delta_at"]` works too."""
        return getattr(self, key)


class FakeState:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.generated_deltas = 0
        self.deltas_by_text: dict[str, int] = {}
        self._fault_uses: dict[tuple[str, int], int] = {}

    def record(self, route: str, body: dict[str, Any], user_text: str) -> RecordedRequest:
        request = RecordedRequest(route=route, body=body, user_text=user_text)
        with self._lock:
            self.requests.append(request)
        return request

    def count_delta(self, request: RecordedRequest) -> None:
        with self._lock:
            written = time.monotonic()
            if request.first_delta_at is None:
                request.first_delta_at = written
            request.delta_times.append(written)
            request.deltas += 1
            self.generated_deltas += 1
            text = request.user_text
            self.deltas_by_text[text] = self.deltas_by_text.get(text, 0) + 1

    def take_fault(self, user_text: str, faults: list[Fault]) -> Fault | None:
        """The first listed fault with budget left for this user text, now spent once."""
        with self._lock:
            for index, fault in enumerate(faults):
                used = self._fault_uses.get((user_text, index), 0)
                if used < fault.times:
                    self._fault_uses[(user_text, index)] = used + 1
                    return fault
        return None

    def observed(self, contains: str = "") -> list[dict[str, Any]]:
        """A copy of the requests whose user text contains `contains`, as JSON, for the
        test-only observation route (`GET /_fake/requests`, server.py)."""
        with self._lock:
            return [
                {
                    "route": request.route,
                    "user_text": request.user_text,
                    "status": request.status,
                    "started_at": request.started_at,
                    "delta_times": list(request.delta_times),
                }
                for request in self.requests
                if contains in request.user_text
            ]

    def forget_requests(self) -> None:
        """Drop the recorded requests (a long benchmark reads each turn's, then frees them)."""
        with self._lock:
            self.requests.clear()

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.generated_deltas = 0
            self.deltas_by_text.clear()
            self._fault_uses.clear()
