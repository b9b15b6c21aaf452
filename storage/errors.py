"""Store errors the gateway turns into 4xx responses."""


class StoreError(Exception):
    code = "store_error"


class MessageConflict(StoreError):
    code = "message_conflict"


class SubmissionConflict(StoreError):
    """A submission id and an idempotency key name different submissions."""

    code = "submission_conflict"


class AgentNotAllowed(StoreError):
    """The tenant's policy does not allow the agent (storage/tenant_policies.py)."""

    code = "agent_not_allowed"


class RateLimited(StoreError):
    """The tenant's submissions bucket is empty (storage/rate_limits.py)."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BudgetExhausted(StoreError):
    """The tenant has used its daily or monthly token budget (storage/tenant_policies.py)."""

    code = "budget_exhausted"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class FileNotFound(StoreError):
    """No such file in the session's workspace (storage/workspaces.py)."""

    code = "file_not_found"


class VersionConflict(StoreError):
    """The file is not at the version the change expected: another change came first."""

    code = "version_conflict"


class FileTooLarge(StoreError):
    code = "file_too_large"


class WorkspaceFull(StoreError):
    code = "workspace_full"


class BlobMissing(StoreError):
    """A file's content is in the workspace blob directory and this process cannot read it
    there: no blob directory here, or not the one the writer used (storage/workspace_blobs.py)."""

    code = "blob_missing"
