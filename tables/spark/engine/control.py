"""What a job asks of its session, the same way for both kinds: a classic in-process session
(a JVM here, `sparkContext`) and a Spark Connect client (the DataFrame API and a few calls).

- `master_of(spark)`, `default_parallelism(spark)`: where and how widely jobs run (Connect: the
  server's `spark.master`; the parallelism measured once per session by a tiny range job,
  since a client has no SparkContext to ask).
- `job_scope(spark, tag, on_stages)`: the Spark work of a block under one tag, so that
  `interrupt(spark, tag)` cancels exactly it from any thread (classic: a job group,
  `cancelJobGroup`; Connect: an operation tag, `interruptTag`), and its stages reported to
  `on_stages` as they run (classic: the status tracker, polled from a thread; Connect: the
  server's progress messages, handled in the job's own thread). Connect reports each
  operation's stages and tasks (done, total) while it runs; job ids and stage names are the
  server's own and not shown to a client.
"""

from __future__ import annotations

import contextlib
import re
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tables.spark.engine.connect import (
    SparkTokenRefused,
    SparkUnavailable,
    address_of,
    is_connect,
    is_refused,
    is_unavailable,
)

POLL_SECONDS = 1.0
TAG_PREFIX = "deltaweb-job-"

_parallelism: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_parallelism_lock = threading.Lock()


def master_of(spark: Any) -> str:
    """The master the session's jobs run on (`local[*]`, `spark://...`)."""
    if is_connect(spark):
        return str(spark.conf.get("spark.master"))
    return str(spark.sparkContext.master)


def default_parallelism(spark: Any) -> int:
    """Spark's default parallelism (how many tasks keep every core busy)."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    with _parallelism_lock:
        known = _parallelism.get(spark)
    if known is not None:
        return known
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        value = int(configured)
    else:
        # a range without a partition count is split into the default parallelism
        from pyspark.sql import functions as F

        ids = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
        value = int(ids.agg(F.max("p")).first()[0]) + 1
    with _parallelism_lock:
        _parallelism[spark] = value
    return value


def job_tag(job_id: int | str) -> str:
    """The tag of a data job's Spark work (no comma: Spark refuses one in a tag)."""
    return TAG_PREFIX + re.sub(r"[^A-Za-z0-9_.-]", "_", str(job_id))


@dataclass(frozen=True, slots=True)
class StageProgress:
    """One Spark stage of a job: its tasks, how many are done, and whether it finished."""

    stage_id: int
    tasks: int
    done_tasks: int
    done: bool


OnStages = Callable[[list[StageProgress]], None]


def stages_line(stages: list[StageProgress]) -> tuple[str, int, int]:
    """(stage text, tasks done, tasks) of a job's stages, for its progress."""
    finished = sum(1 for s in stages if s.done)
    done = sum(s.done_tasks for s in stages)
    total = sum(s.tasks for s in stages)
    return f"Spark: {finished} of {len(stages)} stages done, {done}/{total} tasks", done, total


# --- Connect: one handler per session, dispatching to the thread's job ----------------------------

_local = threading.local()
_handled: weakref.WeakSet[Any] = weakref.WeakSet()


def _connect_handler(stages: Any, inflight_tasks: int, operation_id: str | None, done: bool) -> None:
    """The server's progress of an operation, called in the thread that runs it."""
    sink: OnStages | None = getattr(_local, "on_stages", None)
    if sink is None:
        return
    seen: dict[int, StageProgress] = getattr(_local, "stages", {})
    for s in stages or ():
        seen[s.stage_id] = StageProgress(s.stage_id, s.num_tasks, s.num_completed_tasks, s.done)
    _local.stages = seen
    if seen:
        sink(sorted(seen.values(), key=lambda s: s.stage_id))


@contextlib.contextmanager
def _connect_scope(spark: Any, tag: str, on_stages: OnStages | None) -> Iterator[None]:
    with _parallelism_lock:
        if spark not in _handled:
            spark.registerProgressHandler(_connect_handler)
            _handled.add(spark)
    spark.addTag(tag)  # this thread's operations from now on
    before = getattr(_local, "on_stages", None), getattr(_local, "stages", None)
    _local.on_stages, _local.stages = on_stages, {}
    try:
        yield
    except Exception as exc:
        if is_unavailable(exc):  # the server went away during the job: named, with its address
            raise SparkUnavailable(address_of(spark), "it stopped answering during the job") from None
        if is_refused(exc):  # restarted with another token during the job
            raise SparkTokenRefused(address_of(spark), sent=spark.client.token is not None) from None
        raise
    finally:
        _local.on_stages, _local.stages = before
        spark.removeTag(tag)


# --- classic: a job group, and the status tracker polled from a thread ----------------------------


def _classic_stages(sc: Any, group: str) -> list[StageProgress]:
    tracker = sc.statusTracker()
    out = []
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else ():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                finished = info.numCompletedTasks >= info.numTasks > 0
                out.append(StageProgress(stage_id, info.numTasks, info.numCompletedTasks, finished))
    return sorted(out, key=lambda s: s.stage_id)


@contextlib.contextmanager
def _classic_scope(spark: Any, tag: str, on_stages: OnStages | None) -> Iterator[None]:
    sc = spark.sparkContext
    outer = sc.getLocalProperty("spark.jobGroup.id")
    sc.setJobGroup(tag, tag, interruptOnCancel=True)  # this thread's jobs (pinned threads)
    stop = threading.Event()

    def poll() -> None:
        last: list[StageProgress] = []
        while not stop.wait(POLL_SECONDS):
            try:
                stages = _classic_stages(sc, tag)
            except Exception:  # the context went away: the job's own error tells
                return
            if stages and stages != last and on_stages is not None:
                on_stages(stages)
                last = stages

    poller = threading.Thread(target=poll, name=f"{tag}-stages", daemon=True)
    if on_stages is not None:
        poller.start()
    try:
        yield
    finally:
        stop.set()
        if outer:
            sc.setJobGroup(outer, outer, interruptOnCancel=True)
        else:
            sc._jsc.clearJobGroup()
        if poller.is_alive():
            poller.join(POLL_SECONDS + 1)


def job_scope(spark: Any, tag: str, on_stages: OnStages | None = None) -> contextlib.AbstractContextManager[None]:
    """The Spark work of this thread inside the block runs under `tag` (see the module's doc);
    `on_stages` gets its stages while they run (classic: from another thread)."""
    if is_connect(spark):
        return _connect_scope(spark, tag, on_stages)
    return _classic_scope(spark, tag, on_stages)


def interrupt(spark: Any, tag: str) -> None:
    """Cancel the running Spark work of `tag` (from any thread); its action raises."""
    if is_connect(spark):
        spark.interruptTag(tag)
    else:
        spark.sparkContext.cancelJobGroup(tag)
