"""Replay picks the last action per file identity the same way on small and large inputs.

Below a size the commits after a checkpoint are reconciled with a dict, above it with a
group_by; both must give the state a plain model of the protocol gives (the last action on
a path wins; an add makes it active, a remove a tombstone), on commits parsed from JSON.
"""

from __future__ import annotations

import json
import random
import shutil

import pytest

from tables.delta.log.actions import read_json_actions
from tables.delta.snapshot import replay


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


def _state(snap) -> tuple[list, list]:
    def rows(t):
        return sorted(
            (r["path"], json.dumps(r["deletionVector"], sort_keys=True), r.get("size"))
            for r in t.select(["path", "deletionVector", "size"]).to_pylist()
        )

    return rows(snap.files), rows(snap.tombstones)


def test_keys_spelled_with_escapes_replay_alike(golden_copy) -> None:
    """A commit that names no remove and no deletion vector is parsed without their fields;
    one that spells those keys with JSON escapes names them all the same, and must not lose
    them (a remove missed would show a deleted file, a deletion vector missed deleted rows)."""
    from tables.delta.snapshot.state import load_snapshot

    plain = golden_copy("log-replay-dv-key-cases")
    # and a commit that adds a file with a deletion vector and removes nothing
    log = sorted((plain / "_delta_log").glob("*.json"))
    dv = {
        "storageType": "u",
        "pathOrInlineDv": "j=hZPftg7qJYIw^L+Oz9",
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": 2,
    }
    add = {"path": "part-new.parquet", "partitionValues": {}, "size": 7, "modificationTime": 1, "dataChange": True}
    (plain / "_delta_log" / f"{len(log):020d}.json").write_text(
        json.dumps({"add": {**add, "deletionVector": dv}}) + "\n"
    )
    escaped = plain.parent / "escaped"
    shutil.copytree(plain, escaped)
    for f in sorted((escaped / "_delta_log").glob("*.json")):
        text = f.read_text()
        text = text.replace('"remove":', '"\\u0072emove":').replace('"deletionVector":', '"\\u0064eletionVector":')
        assert '"remove":' not in text and '"deletionVector":' not in text
        f.write_text(text)
    want = _state(load_snapshot(str(plain)))
    active, tombstones = want
    assert any(dv != "null" for _p, dv, _s in active), "the table's active files have deletion vectors"
    assert tombstones, "the table has tombstones"
    assert _state(load_snapshot(str(escaped))) == want


_DV = {"storageType": "u", "pathOrInlineDv": "j=hZPftg7qJYIw^L+Oz9", "offset": 1, "sizeInBytes": 36, "cardinality": 2}
_BODY = {"path": "part-1.parquet", "partitionValues": {}, "size": 7, "dataChange": True}


@pytest.mark.parametrize(
    "action",
    [{"add": {**_BODY, "modificationTime": 1, "deletionVector": _DV}}, {"remove": {**_BODY, "deletionTimestamp": 2}}],
    ids=["add-with-deletion-vector", "remove"],
)
def test_a_commit_whose_only_key_of_note_is_escaped_parses_alike(action: dict) -> None:
    plain = json.dumps({"commitInfo": {"timestamp": 1}}) + "\n" + json.dumps(action) + "\n"
    escaped = plain.replace('"remove":', '"\\u0072emove":').replace('"deletionVector":', '"\\u0064eletionVector":')
    assert escaped != plain
    want = read_json_actions([("0.json", 0, plain.encode())], []).files.to_pylist()
    assert want[0]["is_add"] == ("add" in action) and (want[0]["deletionVector"] is not None) == ("add" in action)
    assert read_json_actions([("0.json", 0, escaped.encode())], []).files.to_pylist() == want


# --- actions nested too deep: every reader of log lines names the file, the line and why ---

_DEPTH = 10_000  # far beyond any decoder's limit (orjson stops at 1024 levels)


def _nested(depth: int, kind: str) -> str:
    return "[" * depth + "1" + "]" * depth if kind == "array" else '{"a":' * depth + "1" + "}" * depth


def _deep_table(root, line: str) -> str:
    """A table of two commits, then commit 2: commitInfo, `line`, an add."""
    from tests.core.builders import add, file_table, write_commit

    file_table(root, [1000, 2000])
    f = write_commit(root, 2, 3000)
    f.write_text(json.dumps({"commitInfo": {"timestamp": 3000}}) + "\n" + line + "\n" + json.dumps(add("p2")) + "\n")
    return f.name


def _assert_too_deep(exc: pytest.ExceptionInfo, name: str, line: int) -> None:
    from tables.delta.errors import CorruptLogError

    assert isinstance(exc.value, CorruptLogError) and exc.value.code == "corrupt_log"
    assert f"{name}: line {line}: the JSON is nested too deep" in str(exc.value)
    assert exc.value.details["line"] == line and exc.value.details["reason"] == "nested_too_deep"


@pytest.mark.parametrize("kind", ["object", "array"])
@pytest.mark.parametrize("depth", [_DEPTH, 300], ids=["beyond-the-decoder", "beyond-the-core"])
@pytest.mark.parametrize(
    "template",
    ['{"txn":{"appId":"a","version":1,"lastUpdated":NESTED}}', '{"unknownAction":NESTED}', '{"metaData":{"x":NESTED}}'],
    ids=["txn", "unknown-action", "metaData"],
)
def test_an_action_nested_too_deep_is_a_corrupt_log_naming_file_and_line(tmp_path, template, depth, kind) -> None:
    """A hostile commit nesting an action 10,000 levels deep failed the replay with orjson's bare
    JSONDecodeError (no file, no line); one 300 levels deep decoded, then failed whoever walked
    or wrote it again (a RecursionError, orjson's 254-level encoder): both are corrupt logs."""
    from tables.delta.snapshot.state import load_snapshot

    name = _deep_table(tmp_path, template.replace("NESTED", _nested(depth, kind)))
    with pytest.raises(Exception) as exc:
        load_snapshot(str(tmp_path))
    _assert_too_deep(exc, name, 2)
    with pytest.raises(Exception) as exc:  # the columnar reader alone, as growth and reachability use it
        read_json_actions([(name, 2, (tmp_path / "_delta_log" / name).read_bytes())], [])
    _assert_too_deep(exc, name, 2)


@pytest.mark.parametrize("depth", [_DEPTH, 600])
def test_a_commit_info_nested_too_deep_is_a_corrupt_log_for_history_and_changes(tmp_path, depth) -> None:
    """commitInfo is read alone (history, timestamps, a sync's reader processes), and a commit's
    lines one by one (change data, alerts): each names the commit and the line."""
    from tables.delta.history.changes import commit_actions
    from tables.delta.history.timeline import history_rows
    from tables.delta.history.timestamps import commit_times
    from tables.delta.storage.opening import as_storage
    from tests.core.builders import file_table

    file_table(tmp_path, [1000, 2000, 3000])
    deep = '{"commitInfo":{"timestamp":3000,"operationParameters":NESTED}}\n'.replace("NESTED", _nested(depth, "array"))
    name = f"{2:020d}.json"
    (tmp_path / "_delta_log" / name).write_text(deep)
    with pytest.raises(Exception) as exc:
        history_rows(commit_times(str(tmp_path)))
    _assert_too_deep(exc, name, 1)
    with pytest.raises(Exception) as exc:
        commit_actions(as_storage(str(tmp_path)), 2)
    _assert_too_deep(exc, name, 1)


def test_a_line_nested_as_deep_as_allowed_is_read(tmp_path) -> None:
    from tables.delta.log.jsonline import MAX_NESTING, loads_line
    from tables.delta.snapshot.state import load_snapshot

    # the line's object, txn's body and lastUpdated's MAX_NESTING - 2 levels: MAX_NESTING in all
    txn = '{"txn":{"appId":"a","version":1,"lastUpdated":NESTED}}'
    _deep_table(tmp_path, txn.replace("NESTED", _nested(MAX_NESTING - 2, "array")))
    assert load_snapshot(str(tmp_path)).txns["a"]["version"] == 1
    with pytest.raises(Exception, match="line 7: the JSON is nested too deep"):
        loads_line(b"[" * (MAX_NESTING + 1) + b"]" * (MAX_NESTING + 1), "x.json", 7)
    # many brackets inside strings, a shallow line: read
    assert loads_line(json.dumps({"s": "{[" * 1000}).encode(), "x.json", 1) == {"s": "{[" * 1000}
