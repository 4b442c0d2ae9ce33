"""Named points where the fault-injection suite (tests/faults/) stops a worker.

DELTAWEB_FAULT_POINTS="restore-committed,sync-batch-stored" makes a worker that reaches one of
these points write a file named after it into DELTAWEB_FAULT_DIR and wait there (up to
DELTAWEB_FAULT_WAIT seconds, 60 by default), so that a test can SIGKILL it exactly there,
instead of guessing with sleeps. Unset (every deployment), `reached` is one dictionary lookup.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_POINTS = frozenset(p.strip() for p in os.environ.get("DELTAWEB_FAULT_POINTS", "").split(",") if p.strip())


def reached(point: str) -> None:
    """Wait at `point` if the environment names it (only ever in the fault suite)."""
    if point not in _POINTS:
        return
    directory = Path(os.environ.get("DELTAWEB_FAULT_DIR", "."))
    (directory / point).write_text(str(os.getpid()))
    time.sleep(float(os.environ.get("DELTAWEB_FAULT_WAIT", "60")))
