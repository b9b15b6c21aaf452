"""`perdure.admit_debounced`: a debounced turn whose quiet period is over starts if it can."""

from temporalio import activity

from perdure.domain.names import ADMIT_DEBOUNCED_ACTIVITY
from perdure.domain.payloads import AdmitDebouncedInput, AdmitDebouncedResult
from storage.db import Database
from storage.submissions import admit_when_due


class AdmitDebouncedActivity:
    def __init__(self, *, db: Database) -> None:
        self._db = db

    @activity.defn(name=ADMIT_DEBOUNCED_ACTIVITY)
    async def admit_debounced(self, turn: AdmitDebouncedInput) -> AdmitDebouncedResult:
        return AdmitDebouncedResult(
            admitted=await admit_when_due(self._db, submission_id=turn.submission_id)
        )
