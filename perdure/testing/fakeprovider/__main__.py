"""Run the fake provider on its own: `python -m perdure.testing.fakeprovider --port 0`.

The first line on stdout is `FAKE_PROVIDER_URL=http://127.0.0.1:PORT`; SIGINT/SIGTERM stop it.
What it recorded can be read from another process with the test-only observation route
`GET /_fake/requests` (`FakeProvider.observe`), which no real API has.
"""

import argparse
import signal
import sys
import threading
from types import FrameType

from perdure.testing.fakeprovider.server import FakeProvider


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perdure.testing.fakeprovider")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args(argv)

    stopping = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    with FakeProvider(host=args.host, port=args.port) as provider:
        print(f"FAKE_PROVIDER_URL={provider.url}", flush=True)
        while not stopping.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
