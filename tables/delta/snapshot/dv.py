"""Deletion vectors: descriptors to sets of deleted row indexes (protocol "Deletion Vectors").

A descriptor (an add's or remove's `deletionVector`) names the rows of one data file that
are no longer in the table. Contract of `read_deletion_vector`: it returns every deleted row
index of the file, sorted, or raises CorruptDeletionVectorError naming the table, the file and
what is wrong (bad Z85, wrong magic number, checksum or size mismatch, a cardinality that
differs from the descriptor's); a DV file that is missing raises MissingDeletionVectorError.
It never returns a partial set.

Storage types:
- 'i' inline: `pathOrInlineDv` is the Z85 encoding of the serialized bitmap (the decoded
  bytes are cut to `sizeInBytes`, Z85 works on 4-byte words).
- 'u' relative: `<random prefix><20 Z85 characters of a UUID>`; the file is
  `<prefix>/deletion_vector_<uuid>.bin` under the table root.
- 'p' absolute: `pathOrInlineDv` is the file's URI (URL-encoded like an add's path).

DV files: one version byte (1), then at `offset` (0 when absent): a big-endian int32 data
size, the bitmap data, and the big-endian CRC-32 of that data.

Bitmaps (RoaringBitmapArray): a 4-byte magic number, then either the portable 64-bit Roaring
format (magic 1681511377, little endian; 64-bit count of buckets, each a 32-bit key and a
standard 32-bit Roaring bitmap) or the older "native" framing (magic 1681511376: a 32-bit
count of bitmaps, each with a 32-bit length; bitmap i holds the rows with high word i), read
in either byte order since the protocol's own inline example frames it big-endian.

Pure Python + pyroaring + numpy; no Spark, no Django.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from typing import Any
from urllib.parse import unquote

import numpy as np
from pyroaring import BitMap, BitMap64

from tables.delta.errors import CorruptDeletionVectorError, MissingDeletionVectorError
from tables.delta.storage.api import Storage

PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376
FILE_FORMAT_VERSION = 1

Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INDEX = {c: i for i, c in enumerate(Z85_ALPHABET)}


# --- Z85 --------------------------------------------------------------------------------------


def z85_decode(text: str) -> bytes:
    """Z85 (ZeroMQ base85) to bytes: each 5 characters are one big-endian 32-bit word.

    Raises ValueError for a length that is not a multiple of 5 or a character outside Z85.
    """
    if len(text) % 5:
        raise ValueError(f"Z85 text length {len(text)} is not a multiple of 5")
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for c in text[i : i + 5]:
            digit = _Z85_INDEX.get(c)
            if digit is None:
                raise ValueError(f"character {c!r} is not in the Z85 alphabet")
            value = value * 85 + digit
        if value > 0xFFFFFFFF:
            raise ValueError(f"Z85 group {text[i : i + 5]!r} is out of range")
        out += value.to_bytes(4, "big")
    return bytes(out)


def z85_encode(data: bytes) -> str:
    """Bytes (padded with zeros to a multiple of 4) to Z85."""
    data = data + b"\x00" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        chars = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chars.append(Z85_ALPHABET[digit])
        out.append("".join(reversed(chars)))
    return "".join(out)


def z85_uuid(text: str) -> uuid.UUID:
    """The UUID encoded in 20 Z85 characters (KeyError/ValueError when it is not Z85)."""
    raw = z85_decode(text)
    if len(raw) != 16:
        raise ValueError(f"a Z85 UUID has 20 characters, not {len(text)}")
    return uuid.UUID(bytes=raw)


# --- where a deletion vector lives --------------------------------------------------------------


def deletion_vector_file(dv: dict[str, Any] | None) -> str | None:
    """The DV file of an on-disk deletion vector: relative to the table root for 'u', the
    descriptor's URI for 'p'; None for inline or no DV. Text that is not Z85 is returned
    as is (callers report it as missing rather than guess)."""
    if not dv or dv.get("storageType") == "i":
        return None
    where = str(dv.get("pathOrInlineDv") or "")
    if dv.get("storageType") == "p":
        return where  # a URI, encoded like an add's path
    if dv.get("storageType") == "u" and len(where) >= 20:
        prefix, encoded = where[:-20], where[-20:]
        try:
            name = f"deletion_vector_{z85_uuid(encoded)}.bin"
        except (KeyError, ValueError):
            return where
        return f"{prefix}/{name}" if prefix else name
    return where


def cardinality(dv: dict[str, Any] | None) -> int:
    """Rows a descriptor says it deletes (0 without a DV)."""
    return int((dv or {}).get("cardinality") or 0)


# --- bitmaps --------------------------------------------------------------------------------------


def _native(data: bytes, order: str) -> np.ndarray:
    (count,) = struct.unpack_from(order + "i", data, 4)
    if count < 0:
        raise ValueError(f"negative bitmap count {count}")
    pos, parts = 8, []
    for high in range(count):
        (size,) = struct.unpack_from(order + "i", data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise ValueError(f"bitmap {high} of size {size} runs past the end of the data")
        low = BitMap.deserialize(data[pos : pos + size])
        pos += size
        if len(low):
            parts.append(np.frombuffer(low.to_array(), dtype=np.uint32).astype(np.uint64) + (np.uint64(high) << 32))
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


def decode_bitmap(data: bytes) -> np.ndarray:
    """Serialized RoaringBitmapArray (with its magic number) to sorted uint64 row indexes.

    Raises ValueError on anything that is not one of the two formats.
    """
    if len(data) < 4:
        raise ValueError(f"{len(data)} bytes cannot hold a magic number")
    magic_le = struct.unpack_from("<I", data, 0)[0]
    magic_be = struct.unpack_from(">I", data, 0)[0]
    if magic_le == PORTABLE_MAGIC:
        if len(data) < 12:
            raise ValueError("portable bitmap shorter than its bucket count")
        try:
            bm = BitMap64.deserialize(data[4:])
        except ValueError as exc:
            raise ValueError(f"portable 64-bit Roaring data does not deserialize ({exc})") from exc
        rows = np.frombuffer(bm.to_array(), dtype=np.uint64)
        if len(rows) and int(rows[-1]) >= 1 << 63:
            raise ValueError("a bucket key has its most significant bit set")
        return rows
    if magic_le == NATIVE_MAGIC:
        return _native(data, "<")
    if magic_be == NATIVE_MAGIC:
        return _native(data, ">")
    raise ValueError(f"unknown magic number {magic_le} (expected {PORTABLE_MAGIC} or {NATIVE_MAGIC})")


def encode_bitmap(rows: Any) -> bytes:
    """Row indexes to the portable RoaringBitmapArray bytes Delta writes (magic first)."""
    return struct.pack("<I", PORTABLE_MAGIC) + BitMap64(int(r) for r in rows).serialize()


def inline_descriptor(rows: Any) -> dict[str, Any]:
    """An inline ('i') descriptor for a set of row indexes (tests and writers)."""
    data = encode_bitmap(rows)
    return {
        "storageType": "i",
        "pathOrInlineDv": z85_encode(data),
        "sizeInBytes": len(data),
        "cardinality": len(set(int(r) for r in rows)),
    }


def dv_file_bytes(bitmaps: list[bytes]) -> tuple[bytes, list[int]]:
    """A DV file holding the given serialized bitmaps, and the offset of each (tests, writers)."""
    out = bytearray([FILE_FORMAT_VERSION])
    offsets = []
    for data in bitmaps:
        offsets.append(len(out))
        out += struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    return bytes(out), offsets


# --- reading a descriptor ---------------------------------------------------------------------------


def _read_file(storage: Storage, where: str) -> bytes:
    """Bytes of a DV file given relative to the root (already decoded) or as a file URI;
    the storage refuses one outside the allowed roots."""
    key = storage.resolve(where) if where.startswith("file:") or "://" in where else where
    return storage.read(key)


def dv_location(dv: dict[str, Any]) -> str:
    """A DV file's location as `_read_file` takes it: decoded relative path or file URI."""
    where = deletion_vector_file(dv) or ""
    if dv.get("storageType") == "p":
        return where if where.startswith("file:") else unquote(where)
    return where  # 'u' paths are built from a prefix and a UUID: nothing to decode


def read_bitmap_bytes(
    storage: Storage, dv: dict[str, Any], where: str = "", cache: dict[str, bytes] | None = None
) -> bytes:
    """The serialized bitmap of a descriptor (the data, without file framing), verified
    against the descriptor's size and the file's checksum. `cache` keeps DV files read
    (one file holds the DVs of many data files)."""
    kind = dv.get("storageType")
    size = dv.get("sizeInBytes")
    label = where or storage.display()
    if kind == "i":
        try:
            data = z85_decode(str(dv.get("pathOrInlineDv") or ""))
        except ValueError as exc:
            raise CorruptDeletionVectorError(f"{label}: inline deletion vector is not valid Z85 ({exc})") from exc
        if size is not None:
            if size > len(data):
                raise CorruptDeletionVectorError(
                    f"{label}: inline deletion vector decodes to {len(data)} bytes, fewer than sizeInBytes {size}"
                )
            data = data[:size]
        return data
    if kind not in ("u", "p"):
        raise CorruptDeletionVectorError(f"{label}: unknown deletion vector storage type {kind!r}")
    if kind == "u":
        try:
            z85_uuid(str(dv.get("pathOrInlineDv") or "")[-20:])
        except (KeyError, ValueError) as exc:
            raise CorruptDeletionVectorError(
                f"{label}: deletion vector path {dv.get('pathOrInlineDv')!r} does not end in a Z85 UUID"
            ) from exc
    rel = dv_location(dv)
    try:
        blob = cache[rel] if cache is not None and rel in cache else _read_file(storage, rel)
    except FileNotFoundError as exc:
        raise MissingDeletionVectorError(
            f"{storage.display()}: deletion vector file {rel} is missing", file=rel
        ) from exc
    if cache is not None:
        cache[rel] = blob
    name = f"{storage.display()}/{rel}" if not rel.startswith("file:") else rel
    if not blob or blob[0] != FILE_FORMAT_VERSION:
        got = blob[0] if blob else "nothing"
        raise CorruptDeletionVectorError(f"{name}: deletion vector file format version {got}, expected 1", file=rel)
    offset = int(dv.get("offset") or 0)
    if offset + 4 > len(blob):
        raise CorruptDeletionVectorError(
            f"{name}: offset {offset} is past the end of the deletion vector file ({len(blob)} bytes)", file=rel
        )
    (data_size,) = struct.unpack_from(">i", blob, offset)
    if size is not None and data_size != size:
        raise CorruptDeletionVectorError(
            f"{name}@{offset}: stored size {data_size} differs from the descriptor's sizeInBytes {size}", file=rel
        )
    start, end = offset + 4, offset + 4 + data_size
    if data_size < 0 or end + 4 > len(blob):
        raise CorruptDeletionVectorError(f"{name}@{offset}: deletion vector runs past the end of the file", file=rel)
    data = blob[start:end]
    (crc,) = struct.unpack_from(">I", blob, end)
    if zlib.crc32(data) != crc:
        raise CorruptDeletionVectorError(f"{name}@{offset}: deletion vector checksum mismatch", file=rel)
    return data


def read_deletion_vector(
    storage: Storage, dv: dict[str, Any] | None, where: str = "", cache: dict[str, bytes] | None = None
) -> np.ndarray:
    """Sorted uint64 row indexes a descriptor deletes (empty without a DV).

    `where` names the data file in error messages. The number of rows must equal the
    descriptor's cardinality.
    """
    if not dv:
        return np.empty(0, dtype=np.uint64)
    label = where or storage.display()
    data = read_bitmap_bytes(storage, dv, label, cache)
    try:
        rows = decode_bitmap(data)
    except (ValueError, struct.error) as exc:
        raise CorruptDeletionVectorError(f"{label}: deletion vector cannot be decoded ({exc})") from exc
    expected = dv.get("cardinality")
    if expected is not None and len(rows) != int(expected):
        raise CorruptDeletionVectorError(
            f"{label}: deletion vector holds {len(rows)} rows but its descriptor says cardinality {expected}"
        )
    return rows
