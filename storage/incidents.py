"""Recovery incidents, one per submission (docs/recovery.md)."""

from perdure.domain.recovery import Incident
from storage.db import Database
from storage.tables import IncidentRow
from storage.timing import now


async def load_incident(db: Database, *, submission_id: str) -> Incident | None:
    async with db.read() as session:
        row = await session.get(IncidentRow, submission_id)
    return Incident.model_validate(row.state) if row is not None else None


async def save_incident(
    db: Database, *, submission_id: str, session_id: str, incident: Incident
) -> None:
    async with db.write() as session:
        row = await session.get(IncidentRow, submission_id)
        state = incident.model_dump(mode="json")
        if row is None:
            row = IncidentRow(
                submission_id=submission_id, session_id=session_id, state=state, updated_at=now()
            )
        else:
            row.state = state
            row.updated_at = now()
        session.add(row)
