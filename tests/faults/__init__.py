"""The fault-injection suite: workers killed at named points (tables/services/jobs/faults.py), the broker
and the database restarted, a full disk, an object store that fails (proxy.py).

Each case runs DELTAWEB_FAULT_RUNS times (1 in `make test`; `make test-faults` runs them 5
times), and every run checks the invariants again."""

import os
import time
from collections.abc import Callable
from typing import Any

import pytest

RUNS = pytest.mark.parametrize("run", range(int(os.environ.get("DELTAWEB_FAULT_RUNS", "1"))))


def wait_until(check: Callable[[], Any], what: str, timeout: float = 180) -> Any:
    """check()'s first truthy answer; a generous timeout, as the machine is often busy."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")
