"""RESTORE at scale: the file work of a restore plan on Spark, then the core's commit writer.

Contract: spark_plan_restore() returns the same RestorePlan (same fingerprint, same actions,
same metrics) as tables.delta.restore.plan.plan_restore(); only where the file work runs differs.
- The core loads both snapshots and decides metadata, protocol and domain metadata
  (prepare_restore); it stays the single source of truth for those.
- Spark gets both file lists as DataFrames (row index, canonical path, deletion-vector unique
  id, size) and anti-joins them both ways on path and null-safe deletion-vector id, as Delta
  Lake's RestoreTableCommand does: target rows not at latest are added, latest rows not in
  the target are removed. The sums for the metrics are observed in the same job.
- The existence of every file to add (data file and on-disk deletion vector) is checked by a
  second Spark job (a Python UDF); its workers resolve paths with the standard library only,
  so a spark:// cluster needs the table mounted at the same path, not this project's code.
- The metrics are those sums, less the missing files when those are ignored (left out).
- The core builds the actions from the log (log_add_actions) and the plan (build_plan).
- A partial restore (`where`, a partition predicate): the core evaluates the predicate on the
  driver, once per distinct partition, and both file lists are restricted to the selected
  partitions before they go to Spark (RestoreSetup.scoped_files), so the anti-joins, the
  check and the metrics see exactly what plan_restore's diff sees.
Progress is reported as (stage, done, total): "loading snapshots", "comparing file lists",
"checking files exist" (files), "computing metrics", and in run_restore "committing".

Jobs take plain arguments and return plain results; nothing here touches the Django ORM.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tables.delta.errors import PathOutsideRootsError, RestoreError
from tables.delta.restore.actions import missing_files
from tables.delta.restore.commit import approved_change, commit_restore, find_restore_commit
from tables.delta.restore.from_pin import bring_back
from tables.delta.restore.plan import RestorePlan, build_plan, check_removals, metrics_from_totals, prepare_restore
from tables.delta.snapshot.dv import deletion_vector_file
from tables.delta.snapshot.replay import canonical_paths, dv_id_column
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage, same_table
from tables.delta.write.commit import now_ms
from tables.spark.engine.connect import is_connect
from tables.spark.engine.control import StageProgress, default_parallelism, interrupt, job_scope, stages_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation, SparkSession

    from tables.delta.snapshot.state import Snapshot

Progress = Callable[[str, int, int | None], None]

# A file list above this many rows is not broadcast to the anti-join (both sides are shuffled).
BROADCAST_MAX_ROWS = 2_000_000
ROWS_PER_PARTITION = 250_000  # file-list rows per partition of the anti-joins
CHECK_ROWS_PER_TASK = 50_000  # files per existence-check task (progress moves per task)
POLL_SECONDS = 0.5

_ADD, _REMOVE = 1, 0


def _report(progress: Progress | None, stage: str, done: int, total: int | None) -> None:
    if progress is not None:
        progress(stage, done, total)


# --- the file lists as Spark sees them ----------------------------------------------------------


def _dv_files(dv: pa.Array) -> pa.Array:
    """The on-disk deletion-vector file of each row (null without one), named by the core's
    deletion_vector_file; computed once per distinct vector file, not per row."""
    out = pa.nulls(len(dv), pa.string())
    if len(dv) == 0 or dv.null_count == len(dv):
        return out
    kind, where = dv.field("storageType"), dv.field("pathOrInlineDv")
    key = pc.binary_join_element_wise(kind, where, "\x00")
    on_disk = pc.and_(pc.is_valid(dv), pc.fill_null(pc.not_equal(kind, "i"), False))
    key = pc.if_else(on_disk, key, pa.scalar(None, pa.string()))
    uniq = pc.unique(key.drop_null())
    if len(uniq) == 0:
        return out
    names = []
    for k in uniq.to_pylist():
        storage_type, _, path_or_inline = k.partition("\x00")
        names.append(deletion_vector_file({"storageType": storage_type, "pathOrInlineDv": path_or_inline}))
    return pc.take(pa.array(names, pa.string()), pc.index_in(key, value_set=uniq))


def file_list(files: pa.Table) -> pa.Table:
    """A snapshot's files as the anti-joins need them: row index, canonical path and
    deletion-vector unique id (the identity replay uses), and size."""
    return pa.table(
        {
            "idx": pa.array(np.arange(files.num_rows, dtype=np.int64)),
            "path": canonical_paths(files.column("path").combine_chunks()),
            "dvId": dv_id_column(files.column("deletionVector").combine_chunks()),
            "size": files.column("size").combine_chunks(),
        }
    )


def check_list(storage: Storage, rows: pa.Table, idx: np.ndarray, names: dict[str, str] | None = None) -> pa.Table:
    """The files to add as the existence check needs them: row index, the local path of the
    data file and of its deletion-vector file (resolved and confined by the storage), and
    size (for the metrics of files left out). `names` collects local path -> the log's path
    (decoded), for reporting missing files as the core does."""
    names = {} if names is None else names
    return pa.table(
        {
            "idx": pa.array(idx, pa.int64()),
            "file": _confined_paths(storage, rows.column("path").combine_chunks(), names),
            "dvFile": _confined_paths(storage, _dv_files(rows.column("deletionVector").combine_chunks()), names),
            "size": rows.column("size").combine_chunks(),
        }
    )


def _missing_files_function(roots: tuple[str, ...]) -> Callable[[str, str | None], list[str] | None]:
    """missing(file, dv_file): the missing ones of a file to add and its deletion-vector file
    (None when both exist), given as local paths the storage resolved and confined on the
    driver. It runs on Spark's workers and uses the standard library only (pickled by value);
    a file that is a symbolic link out of the allowed roots is reported with a leading NUL,
    never probed further."""

    def missing(file: str, dv_file: str | None) -> list[str] | None:
        import os

        def outside(path: str) -> bool:
            if not os.path.islink(path):
                return False
            real = os.path.realpath(path)
            return not any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)

        gone = []
        for f in (file, dv_file):
            if f is None:
                continue
            if outside(f):
                gone.append("\x00" + f)
            elif not os.path.exists(f):
                gone.append(f)
        return gone or None

    return missing


def _confined_paths(storage: Storage, paths: pa.Array, names: dict[str, str]) -> pa.Array:
    """Log paths as checked local paths (the storage refuses one outside the allowed roots)."""
    out: list[str | None] = []
    for p in paths.to_pylist():
        if p is None:
            out.append(None)
            continue
        local = storage.local_file_unchecked(storage.resolve(p))
        names[local] = unquote(p)
        out.append(local)
    return pa.array(out, pa.string())


# --- running a job with progress ----------------------------------------------------------------


class _Job:
    """Spark jobs run by `action` in a helper thread (started at once) under a tag of their
    own; wait() calls `tick(fraction of tasks done)` from the waiting thread, so that progress
    callbacks run where the caller runs, and returns the action's result (or raises its
    error). The same on a classic session and a Connect client (tables.spark.engine.control)."""

    def __init__(self, spark: SparkSession, description: str, action: Callable[[], Any]) -> None:
        from pyspark import InheritableThread

        self.spark = spark
        self.tag = f"deltaweb-{uuid.uuid4().hex}"
        self.box: dict[str, Any] = {}
        self.fraction: float | None = None

        def on_stages(stages: list[StageProgress]) -> None:
            _text, done, total = stages_line(stages)
            if total:
                self.fraction = done / total  # read by the waiting thread

        def run() -> None:
            with job_scope(spark, self.tag, on_stages):
                try:
                    self.box["value"] = action()
                except BaseException as exc:
                    self.box["error"] = exc

        self.thread = InheritableThread(target=run, daemon=True, name=description[:60], session=spark)
        self.thread.start()

    def wait(self, tick: Callable[[float], None]) -> Any:
        try:
            while True:
                self.thread.join(POLL_SECONDS)
                if not self.thread.is_alive():
                    break
                if self.fraction is not None:
                    tick(self.fraction)
        except BaseException:
            self.cancel()
            raise
        if "error" in self.box:
            raise self.box["error"]
        return self.box["value"]

    def cancel(self) -> None:
        if self.thread.is_alive():
            interrupt(self.spark, self.tag)


# --- planning ----------------------------------------------------------------------------------


def _coalesced(spark: SparkSession, df: DataFrame, rows: int, per_partition: int = ROWS_PER_PARTITION) -> DataFrame:
    """`df` in as few partitions as keep every core busy: createDataFrame makes one per
    Arrow batch (10,000 rows), and each task, above all a Python one, has a fixed cost."""
    return df.coalesce(max(default_parallelism(spark), -(-rows // per_partition)))


def _anti_joins(spark: SparkSession, latest: pa.Table, target: pa.Table) -> DataFrame:
    """Rows of both lists not in the other one (kind 1: target rows to add, kind 0: latest
    rows to remove), matched on path and null-safe deletion-vector id."""
    from pyspark.sql import functions as F

    src = _coalesced(spark, spark.createDataFrame(target), target.num_rows).alias("s")  # the version to restore
    tgt = _coalesced(spark, spark.createDataFrame(latest), latest.num_rows).alias("l")  # the latest version

    def keys(df: DataFrame, alias: str, rows: int) -> DataFrame:
        out = df.select("path", "dvId").alias(alias)
        return F.broadcast(out) if rows <= BROADCAST_MAX_ROWS else out

    def on(left: str, right: str) -> Any:
        return (F.col(f"{left}.path") == F.col(f"{right}.path")) & F.col(f"{left}.dvId").eqNullSafe(
            F.col(f"{right}.dvId")
        )

    to_add = src.join(keys(tgt, "lk", latest.num_rows), on("s", "lk"), "left_anti")
    to_remove = tgt.join(keys(src, "sk", target.num_rows), on("l", "sk"), "left_anti")
    return to_add.select(F.lit(_ADD).alias("kind"), "idx", "size").unionByName(
        to_remove.select(F.lit(_REMOVE).alias("kind"), "idx", "size")
    )


def _sums(F: Any) -> list[Any]:
    """Aggregates over the diff: files and bytes to add and to remove."""
    add, rem = F.col("kind") == _ADD, F.col("kind") == _REMOVE
    return [
        F.count(F.when(add, 1)).alias("nAdd"),
        F.sum(F.when(add, F.col("size"))).alias("addSize"),
        F.count(F.when(rem, 1)).alias("nRemove"),
        F.sum(F.when(rem, F.col("size"))).alias("removeSize"),
    ]


def spark_plan_restore(
    spark: SparkSession,
    location: str | Storage,
    version: int | None = None,
    timestamp: str | int | None = None,
    ignore_missing_files: bool = False,
    allow_protocol_downgrade: bool = False,
    progress: Progress | None = None,
    check_files: bool = True,
    clock: Callable[[], int] = now_ms,
    where: str | None = None,
    pinned: str | Storage | None = None,
) -> RestorePlan:
    """plan_restore() with the file diff, existence check and metrics done on Spark; with
    `where`, the partial restore of the partitions that predicate selects; with `pinned` (the
    kept table of the pin that keeps the version), the target read there and the files the
    table lacks found in it (restore/from_pin.py)."""
    storage = as_storage(location)
    # a job's description shows in a classic session's logs; a Connect client has none to set
    describe = (lambda text: None) if is_connect(spark) else spark.sparkContext.setJobDescription
    _report(progress, "loading snapshots", 0, 2)
    setup = prepare_restore(storage, version, timestamp, allow_protocol_downgrade, where=where, pinned=pinned)
    latest_files, target_files = setup.scoped_files()
    _report(progress, "loading snapshots", 2, 2)

    latest = setup.latest
    n_files = latest_files.num_rows + target_files.num_rows
    _report(progress, "comparing file lists", 0, n_files)
    describe(f"deltaweb restore {setup.where} to version {setup.target_version}")
    job: _Job | None = None
    try:
        totals, add_idx, remove_idx = _diff(spark, latest_files, target_files, progress, n_files)
        check_removals(setup, len(remove_idx))
        add_rows = target_files.take(pa.array(add_idx))

        # the existence check runs on Spark while the core reads the actions from the log
        # (build_plan calls find_missing after that, and metrics after find_missing)
        total = len(add_idx)
        left_out = {"n": 0, "bytes": 0}
        log_names: dict[str, str] = {}
        # an object-store table's files have no path an executor can open (no Hadoop
        # connectors here): the core's check through the storage layer (below) does them
        remote = storage.remote
        gone_sums: Observation | None = None
        if check_files and total and not remote:
            job, gone_sums = _start_check(spark, storage, add_rows, add_idx, log_names, progress)
        find_missing = _missing_finder(
            storage, progress, check_files, remote, job, gone_sums, add_idx, log_names, left_out
        )
        return build_plan(
            setup,
            add_rows,
            latest_files.take(pa.array(remove_idx)),
            ignore_missing_files=ignore_missing_files,
            allow_protocol_downgrade=allow_protocol_downgrade,
            check_files=check_files,
            clock=clock,
            find_missing=find_missing,
            # from a pin, files the table lacks are not left out: the adds themselves are counted
            metrics=None if setup.pin is not None else _metrics_function(progress, totals, left_out, latest),
        )
    finally:
        if job is not None:
            job.cancel()  # when the core failed before it waited for the check
        describe(None)


def _diff(
    spark: SparkSession, latest_files: pa.Table, target_files: pa.Table, progress: Progress | None, n_files: int
) -> tuple[Observation, np.ndarray, np.ndarray]:
    """The file diff on Spark: (the observed sums, sorted row indexes to add, sorted ones to remove)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    # one Spark job: both anti-joins, collected; the sums for the metrics are observed
    # while it runs (Observation: aggregated by Spark, no job of their own)
    totals = Observation(f"restore-{uuid.uuid4().hex}")
    diff = _anti_joins(spark, file_list(latest_files), file_list(target_files))
    found = diff.observe(totals, *_sums(F)).select("kind", "idx").toArrow()
    kinds = found.column("kind").to_numpy()
    idxs = found.column("idx").to_numpy()
    add_idx = np.sort(idxs[kinds == _ADD])
    remove_idx = np.sort(idxs[kinds == _REMOVE])
    _report(progress, "comparing file lists", n_files, n_files)
    return totals, add_idx, remove_idx


def _start_check(
    spark: SparkSession,
    storage: Storage,
    add_rows: pa.Table,
    add_idx: np.ndarray,
    log_names: dict[str, str],
    progress: Progress | None,
) -> tuple[_Job, Observation]:
    """Start the Spark job checking that the files to add exist, and the observation of what it finds missing."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    total = len(add_idx)
    _report(progress, "checking files exist", 0, total)
    gone_sums = Observation(f"restore-missing-{uuid.uuid4().hex}")
    missing_of = F.udf(_missing_files_function(storage.roots), "array<string>").asNondeterministic()
    checked = (
        _coalesced(
            spark,
            spark.createDataFrame(check_list(storage, add_rows, add_idx, log_names)),
            total,
            CHECK_ROWS_PER_TASK,
        )
        .select("idx", "size", missing_of("file", "dvFile").alias("missing"))
        .observe(
            gone_sums,
            F.count(F.col("missing")).alias("n"),
            F.sum(F.when(F.col("missing").isNotNull(), F.col("size"))).alias("bytes"),
        )
        .where(F.col("missing").isNotNull())
        .select("idx", "missing")
    )
    return _Job(spark, "deltaweb restore: checking files exist", checked.toArrow), gone_sums


def _missing_finder(
    storage: Storage,
    progress: Progress | None,
    check_files: bool,
    remote: bool,
    job: _Job | None,
    gone_sums: Observation | None,
    add_idx: np.ndarray,
    log_names: dict[str, str],
    left_out: dict[str, int],
) -> Callable[[list[dict[str, Any]]], tuple[list[str], set[int]]]:
    """build_plan's find_missing: the Spark check's result (or the core's, for an object store)."""
    total = len(add_idx)

    def find_missing(adds: list[dict[str, Any]]) -> tuple[list[str], set[int]]:
        if job is None and check_files and remote and adds:
            _report(progress, "checking files exist", 0, len(adds))
            missing, bad = missing_files(storage, adds)
            left_out.update(n=len(bad), bytes=sum(int(adds[i].get("size") or 0) for i in bad))
            _report(progress, "checking files exist", len(adds), len(adds))
            return missing, bad
        if job is None:
            return [], set()
        gone = job.wait(lambda fraction: _report(progress, "checking files exist", int(total * fraction), total))
        missing: list[str] = []
        bad_idx: list[int] = []
        for idx, files in sorted(zip(gone.column("idx").to_pylist(), gone.column("missing").to_pylist(), strict=True)):
            bad_idx.append(idx)
            missing.extend(files)
        refused = [f for f in missing if f.startswith("\x00")]
        if refused:
            raise PathOutsideRootsError(storage.refusal(refused[0][1:]), file=storage.shown(refused[0][1:]))
        missing = [log_names.get(f, storage.shown(f)) for f in missing]
        if bad_idx:
            left_out.update(gone_sums.get)
        _report(progress, "checking files exist", total, total)
        # positions in `adds` (the target's rows in row order) of the files found missing
        return missing, set(np.searchsorted(add_idx, np.array(bad_idx, dtype=np.int64)).tolist())

    return find_missing


def _metrics_function(
    progress: Progress | None, totals: Observation, left_out: dict[str, int], latest: Snapshot
) -> Callable[[], dict[str, str]]:
    """build_plan's metrics: the diff's observed sums, less the files left out as missing."""

    def metrics() -> dict[str, str]:
        _report(progress, "computing metrics", 0, 1)
        sums = totals.get  # less the missing files, which the plan leaves out
        out = metrics_from_totals(
            int(sums["nAdd"] or 0) - int(left_out["n"] or 0),
            int(sums["addSize"] or 0) - int(left_out["bytes"] or 0),
            int(sums["nRemove"] or 0),
            int(sums["removeSize"] or 0),
            latest.num_files,
            latest.size_bytes,
        )
        _report(progress, "computing metrics", 1, 1)
        return out

    return metrics


# --- running an approved restore ---------------------------------------------------------------


def run_restore(
    spark: SparkSession,
    location: str | Storage,
    plan_dict: dict[str, Any],
    txn_id: str,
    progress: Progress | None = None,
    extra_parameters: dict[str, str] | None = None,
    user_name: str | None = None,
    pinned: str | Storage | None = None,
) -> dict[str, Any]:
    """Plan the approved restore again on Spark, on the current head, and commit it when it
    still makes the approved change (tables.delta.restore.commit.approved_change: the same
    fingerprint, or the head only gained files, which the approved change leaves alone).

    Returns commit_restore()'s result (version, verified, metrics, ...) with stale=False; or,
    without committing, {"stale": True, "plan": <the new plan, to_dict()>, ...} when the
    restore would now change something else (other files, metadata, protocol or domains).
    A txn id committed already (a retried job) returns that commit. `extra_parameters` and
    `user_name` go into the commit's commitInfo (commit_restore). `pinned`: the kept table of
    the pin that keeps the version; the files the table lacks are copied from it first.
    """
    who = {"extra_parameters": extra_parameters, "user_name": user_name}
    approved = RestorePlan.from_dict(plan_dict)
    storage = as_storage(location)
    if not same_table(approved.location, storage):
        raise RestoreError(f"{storage.display()}: the restore plan is for another table ({approved.location})")
    if find_restore_commit(storage, approved.read_version, txn_id) is not None:
        return {**commit_restore(storage, approved, txn_id=txn_id, **who), "stale": False}
    current = spark_plan_restore(
        spark,
        storage,
        version=approved.requested_version,
        timestamp=approved.requested_timestamp if approved.requested_version is None else None,
        ignore_missing_files=approved.ignore_missing_files,
        allow_protocol_downgrade=approved.allow_protocol_downgrade,
        progress=progress,
        check_files=approved.files_checked,
        where=approved.predicate,
        pinned=pinned,
    )
    plan = approved_change(current, approved)
    if plan is None:
        return {
            "stale": True,
            "plan": current.to_dict(),
            "fingerprint": current.fingerprint,
            "approvedFingerprint": approved.fingerprint,
        }
    brought = None
    if pinned is not None and plan.pinned_files:
        brought = bring_back(storage, as_storage(pinned), plan.pinned_files, progress)
    _report(progress, "committing", 0, 1)
    # the files were checked on Spark just now (and those from the pin after their copy): the
    # commit does not stat them again
    result = commit_restore(storage, plan, txn_id=txn_id, recheck_files=False, **who)
    if brought is not None:
        result["fromPin"] = brought
    _report(progress, "committing", 1, 1)
    return {**result, "stale": False}
