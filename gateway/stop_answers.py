"""What a stop's answer says of the submission it was for (the store records the stop,
storage/stops.py; the gateway answers it)."""

from storage.stops import StopRecord


def answered_status(record: StopRecord) -> str | None:
    """The status a stop's answer shows: the submission's as the stop found it, or, once it
    has ended, how (an exhausted turn ended `error`)."""
    row = record.submission
    if row is None:
        return None
    status = row.status if record.verdict == "stopped" else (row.ending or row.status)
    return "error" if status == "exhausted" else status
