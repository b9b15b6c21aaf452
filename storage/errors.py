"""Store errors the gateway turns into 4xx responses."""


class StoreError(Exception):
    code = "store_error"


class SessionNotFound(StoreError):
    code = "session_not_found"


class MessageConflict(StoreError):
    code = "message_conflict"
