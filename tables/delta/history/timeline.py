"""History rows (as DESCRIBE HISTORY) and the commit-timestamp timeline with its anomalies.

A page of history reads only the commits on that page: file times come with the listing,
commitInfo from each commit's first line.
"""

from __future__ import annotations

from typing import Any

from tables.delta.history.columns import HISTORY_FIELDS
from tables.delta.history.timestamps import CommitTimes
from tables.delta.log.commitinfo import bounded


def history_rows(times: CommitTimes, offset: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows newest first; `offset`/`limit` page through them without reading other commits."""
    versions = times.versions[::-1]
    page = versions[offset : None if limit is None else offset + limit]
    rows = []
    for v in page:
        read = times.reader.get(v)
        info = read.info or {}
        ts, source = times.timestamp(v)
        i = times.index(v)
        row: dict[str, Any] = {"version": v, "timestamp": ts}
        for name in HISTORY_FIELDS:
            row[name] = bounded(info.get(name))
        row["inCommitTimestamp"] = read.in_commit_timestamp
        row["commitInfoTimestamp"] = read.timestamp
        row["fileModificationTime"] = times.file_times[i]
        row["timestampSource"] = source
        rows.append(row)
    return rows


def timeline(times: CommitTimes) -> dict[str, Any]:
    """Every version's timestamps, the ICT boundary, and the anomalies found (reads every commit)."""
    rows, anomalies = scan_versions(times, times.versions, None)
    return {"ict": times.ict.to_dict(), "versions": rows, "anomalies": table_anomalies(times) + anomalies}


def table_anomalies(times: CommitTimes) -> list[dict[str, Any]]:
    """Anomalies of the ICT configuration itself (cheap: reads at most two commits)."""
    out = [{"version": None, "kind": "enablement_properties_inconsistent", "detail": p} for p in times.ict.problems]
    return out + _enablement_anomalies(times)


def scan_versions(
    times: CommitTimes, versions: list[int], prev: tuple[int, int | None] | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Timeline rows and per-version anomalies for `versions` (ascending).

    `prev` is (file time, ICT) of the version before the first one, when known, so that a
    sync can scan only the new commits and still compare with what came before.
    """
    ict = times.ict
    rows, anomalies = [], []

    def flag(version: int | None, kind: str, detail: str) -> None:
        anomalies.append({"version": version, "kind": kind, "detail": detail})

    if prev is None and versions and times.index(versions[0]) > 0:
        before = times.versions[times.index(versions[0]) - 1]
        prev = (
            times.file_times[times.index(before)],
            times.reader.get(before).in_commit_timestamp if ict.applies(before) else None,
        )
    prev_file, prev_ict = prev if prev is not None else (None, None)
    first = times.index(versions[0]) if versions else 0
    # the versions are usually a run of the listing: their indexes follow, no search each
    run = times.versions[first : first + len(versions)] == versions
    get, file_times, adjusted, applies = times.reader.get, times.file_times, times.adjusted, ict.applies
    for k, v in enumerate(versions):
        i = first + k if run else times.index(v)
        read = get(v)
        if applies(v):  # times.timestamp(v), without looking the version up again
            ts, source = read.in_commit_timestamp, "ict"
        else:
            ts, source = adjusted[i], "file"
        raw = file_times[i]
        rows.append(
            {
                "version": v,
                "fileModificationTime": raw,
                "commitInfoTimestamp": read.timestamp,
                "inCommitTimestamp": read.in_commit_timestamp,
                "timestamp": ts,
                "source": source,
                "adjusted": source == "file" and ts != raw,
            }
        )
        if prev_file is not None and raw <= prev_file:
            flag(
                v,
                "file_time_not_increasing",
                f"commit file time {raw} is not after the previous commit's {prev_file} (was the table copied or moved?)",
            )
        prev_file = raw
        if source != "ict":
            continue
        if read.info is None:
            flag(v, "ict_missing", "ICT is on for this version but the commit has no commitInfo")
        elif read.in_commit_timestamp is None:
            flag(v, "ict_missing", "ICT is on for this version but commitInfo has no inCommitTimestamp")
        elif not read.first:
            flag(v, "commitinfo_not_first", "ICT is on but commitInfo is not the first action of the commit")
        cur = read.in_commit_timestamp
        if cur is not None and prev_ict is not None and cur <= prev_ict:
            flag(v, "ict_not_increasing", f"inCommitTimestamp {cur} is not after the previous commit's {prev_ict}")
        if cur is not None:
            prev_ict = cur
    return rows, anomalies


def _enablement_anomalies(times: CommitTimes) -> list[dict[str, Any]]:
    ict, out = times.ict, []
    if not ict.enabled:
        return out
    ev, et = ict.enablement_version, ict.enablement_timestamp
    if ev is None:
        first = times.versions[0] if times.versions else None
        if first is not None and times.reader.get(first).in_commit_timestamp is None:
            out.append(
                {
                    "version": first,
                    "kind": "enablement_properties_inconsistent",
                    "detail": "ICT is on without delta.inCommitTimestampEnablementVersion, yet older commits "
                    "have no inCommitTimestamp",
                }
            )
        return out
    if ev not in times.versions:
        return out
    enabling = times.reader.get(ev).in_commit_timestamp
    if enabling is not None and enabling != et:
        out.append(
            {
                "version": ev,
                "kind": "enablement_properties_inconsistent",
                "detail": f"delta.inCommitTimestampEnablementTimestamp is {et} but the enabling commit's "
                f"inCommitTimestamp is {enabling}",
            }
        )
    i = times.index(ev)
    if i > 0 and enabling is not None and times.versions[i - 1] == ev - 1 and enabling <= times.file_times[i - 1]:
        out.append(
            {
                "version": ev,
                "kind": "enablement_not_after_previous",
                "detail": f"the enabling commit's inCommitTimestamp {enabling} is not after the previous "
                f"commit's file time {times.file_times[i - 1]}",
            }
        )
    return out
