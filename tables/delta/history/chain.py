"""The hash chain of what was seen: each commit file's SHA-256, chained to the entry before.

A commit's digest is the SHA-256 of its file's bytes, exactly as stored. Its chain entry is

    entry_v = SHA-256(b"deltaweb-chain-v1\\n" || entry_prev || version as 8 bytes big-endian || digest_v)

where `entry_prev` is the entry of the version before in the chain (32 bytes), and 32 zero
bytes for the chain's first version (a chain may start past 0: log cleanup removed the
commits before it when it was first seen). Every value is written as lowercase hex. Rewriting
any commit, inserting one or taking one out changes every entry after it, so an export that
carries the last entry pins the whole range.

Pure: the digests of a table's commits are read through its storage (`commit_digests`);
the services keep what was first seen, the audit export (`history/audit.py`) carries it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tables.delta.log.listing import LogFile, commit_name
from tables.delta.storage.api import Storage

DOMAIN = b"deltaweb-chain-v1\n"
GENESIS = "0" * 64  # the entry "before" a chain's first version
ALGORITHM = "sha256; entry = sha256('deltaweb-chain-v1\\n' || previous entry || version (8 bytes, big-endian) || sha256 of the commit file)"


def commit_digest(data: bytes | memoryview) -> str:
    """The SHA-256 of a commit file's bytes, lowercase hex."""
    return hashlib.sha256(data).hexdigest()


def chain_entry(previous: str | None, version: int, digest: str) -> str:
    """The chain entry of `version` with commit digest `digest`, after entry `previous`
    (None or GENESIS for the chain's first version)."""
    raw = DOMAIN + bytes.fromhex(previous or GENESIS) + version.to_bytes(8, "big") + bytes.fromhex(digest)
    return hashlib.sha256(raw).hexdigest()


def chain_entries(previous: str | None, items: Iterable[tuple[int, str]]) -> list[str]:
    """The entries of (version, digest) in order after `previous`: `chain_entry` in a loop
    that carries the raw bytes on (a cold sync chains 100,000 commits)."""
    prev = bytes.fromhex(previous or GENESIS)
    sha, fromhex, out = hashlib.sha256, bytes.fromhex, []
    for version, digest in items:
        prev = sha(DOMAIN + prev + version.to_bytes(8, "big") + fromhex(digest)).digest()
        out.append(prev.hex())
    return out


@dataclass(frozen=True, slots=True)
class Link:
    """One version's place in the chain."""

    version: int
    digest: str  # sha256 of the commit file's bytes
    entry: str  # chained, see the module's docstring
    size: int

    def to_dict(self) -> dict[str, object]:
        return {"version": self.version, "sha256": self.digest, "entry": self.entry, "size": self.size}


def build_chain(items: Iterable[tuple[int, str, int]], previous: str | None = None) -> list[Link]:
    """The links of (version, digest, size) in ascending version order, chained after `previous`."""
    out: list[Link] = []
    prev = previous
    for version, digest, size in items:
        prev = chain_entry(prev, version, digest)
        out.append(Link(version, digest, prev, size))
    return out


def broken_links(links: Iterable[tuple[int, str, str]], previous: str | None = None) -> list[int]:
    """The versions of (version, digest, entry) whose entry does not follow from the one before
    (the chain recomputed from its digests); also any version not above the one before."""
    bad: list[int] = []
    prev, last = previous, None
    for version, digest, entry in links:
        try:
            expected = chain_entry(prev, version, digest)
        except (ValueError, OverflowError, TypeError):
            expected = None  # not hex, or a version out of range: broken
        if expected != entry or (last is not None and version <= last):
            bad.append(version)
        prev, last = entry, version
    return bad


def commit_digests(storage: Storage, commits: Iterable[LogFile]) -> Iterator[tuple[int, str | None, int]]:
    """(version, digest, size) of each listed commit, read whole; digest None when the file is
    gone since the listing."""
    for lf in commits:
        try:
            data = storage.read(lf.path)
        except FileNotFoundError:
            yield lf.version, None, 0
            continue
        yield lf.version, commit_digest(data), len(data)


def digest_of_version(storage: Storage, version: int) -> tuple[str, int] | None:
    """(digest, size) of `_delta_log/<version>.json` as it is now; None when it is gone."""
    try:
        data = storage.read(commit_name(version))
    except FileNotFoundError:
        return None
    return commit_digest(data), len(data)
