"""A session's workspace over HTTP (docs/workspace.md): list, read, write and delete its
files. A file's version is its ETag: `If-Match` makes a change conditional on it (`412` when
another change came first), `If-None-Match: *` makes a write create only."""

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Request, Response
from starlette.convertors import PathConvertor, register_url_convertor

from gateway.body_limits import body_limit
from gateway.deps import DbDep, OwnedSessionDep, SettingsDep
from gateway.errors import ApiError
from gateway.schemas.common import ERROR_RESPONSES
from gateway.schemas.files import FilesPublic, FileWritten
from perdure.domain.workspace_rules import MAX_PATH_BYTES, BadPath, checked_path
from perdure.runtime.settings import Settings
from storage.sessions import root_session_id
from storage.workspaces import ABSENT, change_file, list_files, read_file

router = APIRouter(prefix="/v1/sessions", tags=["files"])


class _AnyName(PathConvertor):
    """Every name reaches `checked_path`, which refuses a bad one as `bad_path`: Starlette's
    `path` stops at a line break (a name with one was not found, and one ending in one was
    read as the name without it)."""

    regex = "(?s:.*)"


register_url_convertor("file_name", _AnyName())

FilePath = Annotated[
    str,
    Path(
        description=(
            f"The file's name inside the workspace: a/b.txt (at most {MAX_PATH_BYTES} bytes)"
        ),
        # Documented, and checked by `checked_path` (in bytes) so that a longer name is
        # `bad_path` like every other bad name, not FastAPI's `invalid_request`.
        json_schema_extra={"maxLength": MAX_PATH_BYTES},
    ),
]
IfMatch = Annotated[
    str | None, Header(description='The version the file must be at: `"3"` (its ETag).')
]
IfNoneMatch = Annotated[str | None, Header(description="`*`: create only, never overwrite.")]
TEXT = "text/plain; charset=utf-8"
BINARY = "application/octet-stream"


def _path(path: str) -> str:
    try:
        return checked_path(path)
    except BadPath as error:
        raise ApiError(422, "bad_path", str(error)) from None


def _expected(if_match: str | None, if_none_match: str | None) -> int | None:
    if if_none_match is not None:
        if if_none_match.strip() != "*":
            raise ApiError(422, "bad_precondition", "If-None-Match takes only *")
        return ABSENT
    if if_match is None:
        return None
    version = if_match.strip().removeprefix("W/").strip('"')
    if not version.isdigit() or len(version) > 18:
        raise ApiError(422, "bad_precondition", 'If-Match is a file version, e.g. "3"')
    return int(version)


async def _home(session: OwnedSessionDep, db: DbDep) -> str:
    """The session whose workspace this is: a sub-agent's session shows its root chat's, the
    one its turns work in."""
    if session.parent_session_id is None:
        return session.id
    return await root_session_id(db, session_id=session.id)


HomeDep = Annotated[str, Depends(_home)]


def _upload_limit(settings: Settings) -> int:
    return settings.workspace_max_file_bytes


@router.get(
    "/{session_id}/files",
    response_model=FilesPublic,
    responses=ERROR_RESPONSES,
    summary="The session's workspace: every file, by path",
)
async def get_files(home: HomeDep, db: DbDep) -> FilesPublic:
    return FilesPublic.of(await list_files(db, session_id=home))


@router.get(
    "/{session_id}/files/{path:file_name}",
    responses={200: {"content": {TEXT: {}, BINARY: {}}}, **ERROR_RESPONSES},
    summary="A file's content (text as UTF-8, anything else as bytes); its version is its ETag",
)
async def get_file(home: HomeDep, path: FilePath, db: DbDep, settings: SettingsDep) -> Response:
    row = await read_file(db, session_id=home, path=_path(path), blobs=settings.workspace_blobs())
    try:
        row.content.decode()
        media_type = TEXT
    except UnicodeDecodeError:
        media_type = BINARY
    return Response(
        row.content,
        media_type=media_type,
        headers={"ETag": f'"{row.version}"', "Cache-Control": "no-store"},
    )


@router.put(
    "/{session_id}/files/{path:file_name}",
    response_model=FileWritten,
    responses={201: {"model": FileWritten, "description": "A new file"}, **ERROR_RESPONSES},
    summary="Write a file whole (the request body is its content)",
)
@body_limit(_upload_limit)
async def put_file(
    session: OwnedSessionDep,
    home: HomeDep,
    path: FilePath,
    request: Request,
    response: Response,
    db: DbDep,
    settings: SettingsDep,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
) -> FileWritten:
    checked, expected = _path(path), _expected(if_match, if_none_match)
    content = await request.body()
    result = await change_file(
        db,
        tenant_id=session.tenant_id,
        session_id=home,
        path=checked,
        change=lambda _: content,
        limits=settings.workspace_limits(),
        blobs=settings.workspace_blobs(),
        expected_version=expected,
    )
    response.status_code = 201 if result["created"] else 200
    response.headers["ETag"] = f'"{result["version"]}"'
    return FileWritten(
        path=checked, size=len(content), version=result["version"], created=result["created"]
    )


@router.delete(
    "/{session_id}/files/{path:file_name}",
    status_code=204,
    responses=ERROR_RESPONSES,
    summary="Delete a file",
)
async def remove_file(
    session: OwnedSessionDep,
    home: HomeDep,
    path: FilePath,
    db: DbDep,
    settings: SettingsDep,
    if_match: IfMatch = None,
) -> Response:
    await change_file(
        db,
        tenant_id=session.tenant_id,
        session_id=home,
        path=_path(path),
        change=lambda _: None,
        limits=settings.workspace_limits(),
        blobs=settings.workspace_blobs(),
        expected_version=_expected(if_match, None),
    )
    return Response(status_code=204)
