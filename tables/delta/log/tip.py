"""The newest commit of a log that a writer has not finished: a table mid-write stays readable.

A writer that streams its commit file (a local file system, an object store's multipart
upload seen through a proxy, a crash half-way) leaves `N.json` cut off in its last line for
a while, or for good. Every version before it is complete, so readers show the table up to
version N-1, name version N and why it cannot be read yet, and read it again next time: once
the file is whole it is an ordinary commit.

Only the tip is judged so. A commit cut off in the middle of the log (a later commit exists
that is readable), one whose earlier line is broken, or one whose broken line is not a cut
JSON value (a wrong character, not the end of the data) is corruption and keeps its
CorruptLogError. Nothing of an incomplete commit is kept: the listing simply leaves it out
(tables.delta.log.listing reads the tip and trims it; this module judges bytes only).
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

TAIL_READ = 1 << 16  # bytes read from the end of a big tip: its last line is judged alone
MAX_RUN = 8  # newest commits judged one after another (a tip cut short by two writers)


@dataclass(frozen=True, slots=True)
class IncompleteCommit:
    """The oldest of the newest commits that cannot be read yet (`later`: those after it)."""

    version: int
    path: str  # relative to the table, as the log names it: `_delta_log/<v>.json`
    reason: str  # e.g. "line 1 is not valid JSON at char 150"
    size: int | None = None  # the file's size when judged: a writer still at it changes it
    later: tuple[int, ...] = ()

    @property
    def shown_up_to(self) -> int:
        return self.version - 1

    def message(self, retry: str = "retried on the next sync") -> str:
        """One line for a page, a sync's result or a command's warning."""
        more = f" (and {len(self.later)} later)" if self.later else ""
        return (
            f"version {self.version}'s commit file{more} is incomplete: {self.reason}; "
            f"shown up to version {self.shown_up_to}; {retry}"
        )

    def to_dict(self) -> dict[str, object]:
        """What a sync keeps and the API shows: plain JSON values."""
        return {
            "version": self.version,
            "file": self.path,
            "reason": self.reason,
            "size": self.size,
            "later": list(self.later),
            "message": self.message(),
        }


def _cut_short(line: bytes) -> int | None:
    """Where `line` ends while its JSON value goes on (the decoder's position), or None when
    it is whole or broken otherwise. A multi-byte character cut in two is a cut too."""
    for trim in range(4):
        part = line[: len(line) - trim] if trim else line
        if not part:
            return 0
        try:
            orjson.loads(part)
        except orjson.JSONDecodeError as exc:
            text = str(exc)
            if text.startswith("unexpected end of data"):
                return exc.pos
            if "UTF-8" not in text:
                return None
            continue
        return None  # a whole value: the line is not cut
    return None


def _last_line(data: bytes) -> tuple[int, bytes]:
    """(1-based number, bytes) of the last line holding more than blanks; (0, b"") for none."""
    body = data.rstrip(b" \t\r\n")
    if not body:
        return 0, b""
    start = body.rfind(b"\n") + 1
    return body.count(b"\n") + 1, body[start:]


def judge(data: bytes, whole: bool = True) -> str | None:
    """Why a commit's content is incomplete, or None when it is not (complete or corrupt).

    `whole`: `data` is the whole file, not its end: then every line before the last must be
    JSON too (else the file is corrupt, not cut short)."""
    # an empty file is an empty commit (it holds no action), not one cut short: writers put a
    # commit whole (rename, put-if-absent), and the log's replay reads it as such
    lineno, line = _last_line(data)
    if not line:
        return None
    pos = _cut_short(line)
    if pos is None:
        return None
    if whole:
        for earlier in data.rstrip(b" \t\r\n").split(b"\n")[: lineno - 1]:
            if earlier.strip():
                try:
                    orjson.loads(earlier)
                except orjson.JSONDecodeError:
                    return None  # a broken line before the last: corruption
    return f"line {lineno} is not valid JSON at char {pos}"
