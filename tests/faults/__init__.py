"""The fault-injection suite: workers killed at named points (tables/faults.py), the broker
and the database restarted, a full disk, an object store that fails (proxy.py).

Each case runs DELTAWEB_FAULT_RUNS times (1 in `make test`; `make test-faults` runs them 5
times), and every run checks the invariants again."""

import os

import pytest

RUNS = pytest.mark.parametrize("run", range(int(os.environ.get("DELTAWEB_FAULT_RUNS", "1"))))
