"""A fake model provider that speaks the real streaming wire formats (see `server.FakeProvider`)."""

from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.fakeprovider.state import RecordedRequest

__all__ = ["FakeProvider", "RecordedRequest"]
