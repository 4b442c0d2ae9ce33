"""Replay picks the last action per file identity the same way on small and large inputs.

Below a size the commits after a checkpoint are reconciled with a dict, above it with a
group_by; both must give the state a plain model of the protocol gives (the last action on
a path wins; an add makes it active, a remove a tombstone), on commits parsed from JSON.
"""

from __future__ import annotations

import json
import random

import pytest

from tables.delta import replay
from tables.delta.actions import read_json_actions


def _commits(n_files: int, seed: int) -> tuple[list[tuple[str, int, bytes]], dict[str, bool]]:
    """Commits that add, re-add and remove files at random, and the model's final state."""
    rng = random.Random(seed)
    state: dict[str, bool] = {}
    sources = []
    for version in range(5):
        lines = []
        for _ in range(n_files // 5):
            path = f"part-{rng.randrange(n_files):06d}.parquet"
            add = rng.random() < 0.7
            body = {"path": path, "size": 1, "dataChange": True, "partitionValues": {}}
            lines.append({"add" if add else "remove": {**body, "modificationTime": version} if add else body})
            state[path] = add
        sources.append((f"{version}.json", version, "\n".join(json.dumps(x) for x in lines).encode() + b"\n"))
    return sources, state


@pytest.mark.parametrize("small", [True, False])
def test_small_and_large_reconciliation_match_the_model(small: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    sources, state = _commits(30_000, seed=11)
    monkeypatch.setattr(replay, "_SMALL", 10**9 if small else 0)
    active, tombstones = replay.reconcile_files(read_json_actions(sources, []).files)
    assert sorted(active.column("path").to_pylist()) == sorted(p for p, a in state.items() if a)
    assert sorted(tombstones.column("path").to_pylist()) == sorted(p for p, a in state.items() if not a)
