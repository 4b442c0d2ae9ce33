"""`delta restore`: RESTORE TO VERSION / TIMESTAMP AS OF, the plan (--dry-run) or the commit;
and `delta keep`: a version written as a new table's version 0 (kept through the VACUUM of
its own)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tables.delta.cli.base import text_table


def restore_payload(path: str, opts: Mapping[str, Any]) -> dict[str, Any]:
    """Plan a RESTORE; with dry_run, the plan; otherwise commit it and return the result."""
    from tables.delta.restore.commit import commit_restore
    from tables.delta.restore.plan import plan_restore

    plan = plan_restore(
        path,
        version=opts.get("version"),
        timestamp=opts.get("timestamp"),
        ignore_missing_files=bool(opts.get("ignore_missing_files")),
        allow_protocol_downgrade=bool(opts.get("allow_protocol_downgrade")),
        where=opts.get("where"),
    )
    if opts.get("dry_run"):
        return {"dryRun": True, **plan.to_dict()}
    result = commit_restore(path, plan)
    return {"dryRun": False, **result, "plan": plan.to_dict(files=False)}


def _partition_text(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={'null' if v is None else v}" for k, v in values.items())


def restore_text(p: dict[str, Any]) -> str:
    plan = p if p["dryRun"] else p["plan"]
    res = plan.get("resolution")
    lines = []
    if p["dryRun"]:
        lines.append(f"dry run: nothing written; restoring would create version {plan['readVersion'] + 1}")
    else:
        lines.append(
            f"restored version {plan['targetVersion']} as version {p['version']}"
            + (" (committed before with this txnId)" if p.get("alreadyCommitted") else "")
            + (f", on top of versions {', '.join(map(str, p['rebasedOver']))}" if p.get("rebasedOver") else "")
            + f"; verified: {'yes' if p['verified'] else 'NO'}"
        )
    lines.append(f"target       version {plan['targetVersion']} (planned on version {plan['readVersion']})")
    if res:
        lines.append(f"timestamp    {plan['requested']['timestamp']} -> version {res['version']}: {res['rule']}")
    if plan.get("predicate") is not None:
        lines.append(f"where        {plan['predicate']} (partial restore: other partitions stay as they are)")
    from tables.delta.restore.rules import protocol_outcome_words

    lines.append(f"protocol     {protocol_outcome_words(plan['protocolOutcome'])}: {plan['protocolNote']}")
    for n in plan["notes"]:
        lines.append(f"note         {n}")
    impact = plan.get("rowImpact")
    if impact:
        lines.append(
            f"rows         {impact['rowsNow']} now -> {impact['rowsAfter']} after "
            f"(+{impact['rowsAdded']} added back, -{impact['rowsRemoved']} removed)"
            + ("; an estimate: some files have no statistics" if impact["estimate"] else "")
        )
    metrics = p["metrics"] if not p["dryRun"] else plan["metrics"]
    text = "\n".join(lines) + "\n\n" + text_table(["metric", "value"], [[k, v] for k, v in metrics.items()])
    if impact and impact.get("partitions"):
        text += "\n" + text_table(
            ["partition", "rows now", "rows after", "added", "removed"],
            [
                [_partition_text(q["partition"]) + (" (estimate)" if q["estimate"] else ""),
                 q["rowsNow"], q["rowsAfter"], q["rowsAdded"], q["rowsRemoved"]]
                for q in impact["partitions"]
            ],
        )  # fmt: skip
        if impact.get("partitionsTruncated"):
            text += f"... {impact['numPartitionsChanged']} partitions change in all (--json lists the first 100)\n"
    if p["dryRun"]:
        rows = [["add", a["path"], a.get("size")] for a in plan["adds"][:50]]
        rows += [["remove", r["path"], r.get("size")] for r in plan["removes"][:50]]
        if rows:
            text += "\n" + text_table(["action", "path", "size"], rows)
        more = max(0, len(plan["adds"]) - 50) + max(0, len(plan["removes"]) - 50)
        if more:
            text += f"... and {more} more file actions (--json lists them all)\n"
    return text


def keep_payload(path: str, opts: Mapping[str, Any]) -> Any:
    """Keep --version into --into (--hold: legal holds on S3 with Object Lock)."""
    from tables.delta.write.keep import keep_version

    if opts["version"] < 0:
        raise ValueError("--version must be >= 0")
    return keep_version(path, opts["version"], opts["into"], hold=bool(opts.get("hold"))).to_dict()


def keep_text(p: dict[str, Any]) -> str:
    placed = ", ".join(f"{n} {how}" for how, n in p["placed"].items()) or "none"
    return (
        f"kept version {p['version']} of {p['source']}\n"
        f"into         {p['into']} (version 0)\n"
        f"files        {p['files']} ({p['bytes']} bytes), {p['deletionVectors']} deletion vector files\n"
        f"placed       {placed}; {p['bytesCopied']} bytes copied\n"
    )
