"""`perdure.admit_debounced`: a debounced turn whose quiet period is over starts if it can."""

from dataclasses import dataclass

from temporalio import activity

from activities.base import StoreActivity
from perdure.domain.names import ADMIT_DEBOUNCED_ACTIVITY
from perdure.domain.payloads import AdmitDebouncedInput, AdmitDebouncedResult
from storage.admission import admit_when_due


@dataclass(kw_only=True, eq=False)
class AdmitDebouncedActivity(StoreActivity):
    @activity.defn(name=ADMIT_DEBOUNCED_ACTIVITY)
    async def admit_debounced(self, turn: AdmitDebouncedInput) -> AdmitDebouncedResult:
        return AdmitDebouncedResult(
            admitted=await admit_when_due(self.db, submission_id=turn.submission_id)
        )
