"""`/v1/sessions/{id}/files`: a session's workspace, read and changed from outside."""

from datetime import UTC, datetime

from pydantic import BaseModel, Field

from storage.workspaces import FileInfo, Listing


class FilePublic(BaseModel):
    path: str
    size: int = Field(description="Bytes.")
    sha256: str
    version: int = Field(
        description="The workspace's version it was last written at: send it as `If-Match` "
        "to change the file only if nobody changed it since."
    )
    updatedAt: datetime  # noqa: N815 - wire name

    @classmethod
    def of(cls, info: FileInfo) -> "FilePublic":
        return cls(
            path=info.path,
            size=info.size,
            sha256=info.sha256,
            version=info.version,
            updatedAt=datetime.fromtimestamp(info.updated_at, UTC),
        )


class FilesPublic(BaseModel):
    version: int = Field(description="Every change of a file of the workspace adds one.")
    totalBytes: int  # noqa: N815
    files: list[FilePublic] = Field(description="By path.")

    @classmethod
    def of(cls, listing: Listing) -> "FilesPublic":
        return cls(
            version=listing.version,
            totalBytes=listing.total_bytes,
            files=[FilePublic.of(info) for info in listing.files],
        )


class FileWritten(BaseModel):
    path: str
    size: int
    version: int
    created: bool = Field(description="True when the file did not exist before.")
