"""A fake model provider that speaks the real streaming wire formats (see `server.FakeProvider`)."""

from tests.fakeprovider.server import FakeProvider
from tests.fakeprovider.state import RecordedRequest

__all__ = ["FakeProvider", "RecordedRequest"]
