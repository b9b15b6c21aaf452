"""The HTTP gateway: AI SDK chat endpoints and the session API."""
