"""What a recipient of a windowed table may learn: nothing about the versions, times or counts
outside its window. A table of versions 0..9, one hour apart, shared as versions 2..6, is sent
every request that errs or resolves a time (timestamps before, inside and after the window;
versions before and after it; reversed ranges; startingTimestamp on the version endpoint) on
every endpoint, and no answer, body or header, may name a version outside 2..6 or the commit
time of one. With In-Commit Timestamps enabled after the window (version 8), before it (1), and
never."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from tables.delta.history.timestamps import format_ms
from tables.models import Recipient, Share, SharedTable, Table
from tables.services.sharing.recipients import issue_token
from tests.core.builders import file_table, ict_table

HOUR = 3_600_000
BASE = 1_780_000_000_000  # 2026-05-28
WINDOW = range(2, 7)
OUTSIDE = [0, 1, 7, 8, 9]
URL = "/delta-sharing/shares/s1/schemas/default/tables/t"


def build(root: Path, enable_at: int | None) -> dict[int, int]:
    """Versions 0..9 an hour apart (ICT from `enable_at`, none when None): each version's time."""
    mtimes = [BASE + v * HOUR for v in range(10)]
    if enable_at is None:
        file_table(root, mtimes)
        return dict(enumerate(mtimes))
    icts = [BASE + v * HOUR + 7 * 60_000 for v in range(10)]  # ICT 7 minutes after the file time
    ict_table(root, mtimes, icts, enable_at=enable_at)
    return {v: (icts[v] if v >= enable_at else mtimes[v]) for v in range(10)}


def leaks(text: str, times: dict[int, int]) -> list[str]:
    """What in `text` speaks of a version or a time outside the window."""
    found = []
    for m in re.finditer(r"\bversions?\s+(\d+)|(\d+)\.\.(\d+)", text):
        numbers = [int(g) for g in m.groups() if g is not None]
        if any(n not in WINDOW for n in numbers):
            found.append(m.group(0))
    for v in OUTSIDE:
        t = times[v]
        stamp = format_ms(t)
        for shown in (stamp, stamp[:16], stamp[:16].replace("T", " "), str(t), str(t // 1000)):
            if shown in text:
                found.append(f"{shown} (version {v}'s time)")
    return found


def at(ms: int) -> str:
    return format_ms(ms)


@pytest.mark.django_db
@pytest.mark.parametrize("enable_at", [None, 1, 8], ids=["no-ict", "ict-before-window", "ict-after-window"])
def test_no_answer_speaks_of_what_lies_outside_the_window(enable_at, settings, tmp_path) -> None:
    root = tmp_path / "t"
    times = build(root, enable_at)
    for v in range(10):  # the files the log names (a version whose files are gone is refused)
        (root / f"part-{v:05d}.parquet").write_bytes(b"")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    table = Table.objects.create(name="t", slug="t", location=str(root))
    share = Share.objects.create(name="s1")
    SharedTable.objects.create(share=share, name="t", table=table, first_version=2, last_version=6, change_data=True)
    recipient = Recipient.objects.create(name="partner")
    recipient.shares.add(share)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {issue_token(recipient)}"}
    client = Client()
    half = HOUR // 2
    stamps = {
        "long before": at(BASE - 100 * HOUR),
        "before 0": at(times[0] - half),
        "between 1 and 2": at(times[1] + half),
        "inside": at(times[4] + half),
        "between 6 and 7": at(times[6] + half),
        "between 8 and 9": at(times[8] + half),
        "after 9": at(times[9] + half),
        "far after": at(times[9] + 1000 * HOUR),
    }
    bodies: list[dict] = [{"timestamp": s} for s in stamps.values()]
    bodies += [{"version": v} for v in (0, 1, 7, 9, 100)]
    bodies += [
        {"startingVersion": 5, "endingVersion": 3},
        {"startingVersion": 9, "endingVersion": 7},
        {"startingVersion": 0},
        {"startingVersion": 7},
        {"startingVersion": 2, "endingVersion": 9},
    ]
    answers = []
    for body in bodies:
        answers.append((f"query {body}", client.post(f"{URL}/query", body, content_type="application/json", **auth)))
    params: list[dict] = [{"startingVersion": v} for v in (0, 1, 7, 9)]
    params += [{"startingVersion": 2, "endingVersion": v} for v in (7, 9)]
    params += [{"startingVersion": 5, "endingVersion": 3}, {"startingVersion": 8, "endingVersion": 7}]
    params += [{"startingTimestamp": s} for s in stamps.values()]
    params += [{"startingVersion": 2, "endingTimestamp": s} for s in stamps.values()]
    for p in params:
        answers.append((f"changes {p}", client.get(f"{URL}/changes", p, **auth)))
    for s in stamps.values():
        answers.append((f"version at {s}", client.get(f"{URL}/version", {"startingTimestamp": s}, **auth)))
    answers.append(("version", client.get(f"{URL}/version", **auth)))
    answers.append(("metadata", client.get(f"{URL}/metadata", **auth)))

    found = {}
    for what, response in answers:
        assert response.status_code < 500, (what, response.content[:300])
        text = response.content.decode() + "\n" + "\n".join(f"{k}: {v}" for k, v in response.headers.items())
        if response.status_code == 200 and "Delta-Table-Version" in response.headers:
            assert int(response.headers["Delta-Table-Version"]) in WINDOW, what
            text = re.sub(r'"(version|timestamp)":\d+', "", text)  # checked as versions below
        if leaks(text, times):
            found[what] = leaks(text, times)
    assert found == {}
    # and the refusals are refusals: reversed ranges on both endpoints, times after the window
    reversed_query = client.post(
        f"{URL}/query", {"startingVersion": 5, "endingVersion": 3}, content_type="application/json", **auth
    )
    assert reversed_query.status_code == 400 and reversed_query.json()["errorCode"] == "INVALID_PARAMETER_VALUE"
    reversed_changes = client.get(f"{URL}/changes", {"startingVersion": 5, "endingVersion": 3}, **auth)
    assert reversed_changes.status_code == 400
    after = client.post(f"{URL}/query", {"timestamp": stamps["after 9"]}, content_type="application/json", **auth)
    assert after.status_code == 400 and "version 6" in after.json()["message"], after.json()
    before = client.post(f"{URL}/query", {"timestamp": stamps["before 0"]}, content_type="application/json", **auth)
    assert before.status_code == 400 and "version 2" in before.json()["message"], before.json()
    # a time inside the window is answered with the version the table's own rule picks
    inside = client.post(f"{URL}/query", {"timestamp": stamps["inside"]}, content_type="application/json", **auth)
    assert inside.status_code == 200 and inside.headers["Delta-Table-Version"] == "4"
    between = client.post(
        f"{URL}/query", {"timestamp": stamps["between 1 and 2"]}, content_type="application/json", **auth
    )
    assert between.status_code == 400  # version 1 is the answer, and it is not shared
