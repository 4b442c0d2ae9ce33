"""Deletion vectors in the core (tables.delta.snapshot.dv): Z85, both bitmap formats, DV files.

Golden tables: every deletion vector any `add` of `dv-with-columnmapping` and
`dv-partitioned-with-checkpoint` carries (all versions, on-disk 'u' vectors written by Delta
Lake) decodes, passes its checksum, and holds exactly `cardinality` rows. Inline vectors come
from the protocol's own example and from round trips.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest

from tables.delta.errors import CorruptDeletionVectorError, MissingDeletionVectorError
from tables.delta.snapshot.dv import (
    NATIVE_MAGIC,
    decode_bitmap,
    deletion_vector_file,
    dv_file_bytes,
    encode_bitmap,
    inline_descriptor,
    read_deletion_vector,
    z85_decode,
    z85_encode,
    z85_uuid,
)
from tables.delta.storage.opening import open_storage
from tests.conftest import golden_path

DV_TABLES = ["dv-with-columnmapping", "dv-partitioned-with-checkpoint"]


def log_adds_with_dvs(root) -> list[dict]:
    adds = []
    for f in sorted((root / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            if line.strip():
                add = json.loads(line).get("add")
                if add and add.get("deletionVector"):
                    adds.append(add)
    return adds


@pytest.mark.parametrize("name", DV_TABLES)
def test_golden_vectors_decode_with_their_cardinality(name) -> None:
    root = golden_path(name)
    storage = open_storage(root)
    adds = log_adds_with_dvs(root)
    assert adds, "the table has deletion vectors"
    cache: dict[str, bytes] = {}
    for add in adds:
        dv = add["deletionVector"]
        assert dv["storageType"] == "u"
        rows = read_deletion_vector(storage, dv, add["path"], cache)
        assert len(rows) == dv["cardinality"]
        assert rows.dtype == np.uint64 and list(rows) == sorted(set(rows.tolist()))
        stats = json.loads(add["stats"])
        assert int(rows.max()) < stats["numRecords"], "deleted rows are rows of the file"
    assert cache, "DV files are read once into the cache"


def test_protocol_inline_example() -> None:
    dv = {
        "storageType": "i",
        "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
        "sizeInBytes": 40,
        "cardinality": 6,
    }
    rows = read_deletion_vector(open_storage("/nonexistent"), dv)
    assert rows.tolist() == [3, 4, 7, 11, 18, 29]
    # the example is in the older native framing, big-endian
    assert int.from_bytes(z85_decode(dv["pathOrInlineDv"])[:4], "big") == NATIVE_MAGIC


def test_protocol_path_examples() -> None:
    dv = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 4}
    assert deletion_vector_file(dv) == "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert deletion_vector_file({"storageType": "p", "pathOrInlineDv": "s3://t/dv.bin"}) == "s3://t/dv.bin"
    assert deletion_vector_file({"storageType": "i", "pathOrInlineDv": "x"}) is None
    assert deletion_vector_file(None) is None


def test_z85_round_trip_and_errors() -> None:
    u = uuid.uuid4()
    assert z85_uuid(z85_encode(u.bytes)) == u
    data = bytes(range(64))
    assert z85_decode(z85_encode(data)) == data
    with pytest.raises(ValueError):
        z85_decode("abcd")
    with pytest.raises(ValueError):
        z85_decode("abc`e")


@pytest.mark.parametrize(
    "rows",
    [[], [0], [3, 4, 7, 11, 18, 29], list(range(0, 200_000, 3)), [1, 2**32 + 5, 2**40], list(range(70_000))],
)
def test_portable_round_trip(rows) -> None:
    assert decode_bitmap(encode_bitmap(rows)).tolist() == sorted(rows)
    dv = inline_descriptor(rows)
    assert read_deletion_vector(open_storage("/nonexistent"), dv).tolist() == sorted(rows)


def test_native_little_endian_framing() -> None:
    from pyroaring import BitMap

    low, high = BitMap([1, 2, 3]).serialize(), BitMap([7]).serialize()
    data = NATIVE_MAGIC.to_bytes(4, "little") + (2).to_bytes(4, "little")
    data += len(low).to_bytes(4, "little") + low + len(high).to_bytes(4, "little") + high
    assert decode_bitmap(data).tolist() == [1, 2, 3, (1 << 32) + 7]


def test_dv_file_offsets_checksum_and_errors(tmp_path) -> None:
    a, b = encode_bitmap([0, 5]), encode_bitmap([9])
    blob, offsets = dv_file_bytes([a, b])
    u = uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
    (tmp_path / "xy").mkdir()
    (tmp_path / "xy" / f"deletion_vector_{u}.bin").write_bytes(blob)
    storage = open_storage(tmp_path)
    base = {"storageType": "u", "pathOrInlineDv": "xy" + z85_encode(u.bytes)}
    first = {**base, "offset": offsets[0], "sizeInBytes": len(a), "cardinality": 2}
    second = {**base, "offset": offsets[1], "sizeInBytes": len(b), "cardinality": 1}
    assert read_deletion_vector(storage, first).tolist() == [0, 5]
    assert read_deletion_vector(storage, second).tolist() == [9]
    absolute = {**second, "storageType": "p", "pathOrInlineDv": (tmp_path / "xy" / f"deletion_vector_{u}.bin").as_uri()}
    assert read_deletion_vector(storage, absolute).tolist() == [9]

    with pytest.raises(CorruptDeletionVectorError, match="cardinality 3"):
        read_deletion_vector(storage, {**first, "cardinality": 3})
    with pytest.raises(CorruptDeletionVectorError, match="sizeInBytes"):
        read_deletion_vector(storage, {**first, "sizeInBytes": len(a) + 1})
    corrupt = bytearray(blob)
    corrupt[offsets[0] + 8] ^= 0xFF
    (tmp_path / "xy" / f"deletion_vector_{u}.bin").write_bytes(bytes(corrupt))
    with pytest.raises(CorruptDeletionVectorError, match="checksum"):
        read_deletion_vector(storage, first)
    with pytest.raises(MissingDeletionVectorError, match="missing"):
        read_deletion_vector(storage, {**first, "pathOrInlineDv": z85_encode(uuid.uuid4().bytes)})
    with pytest.raises(CorruptDeletionVectorError, match="Z85"):
        read_deletion_vector(storage, {"storageType": "i", "pathOrInlineDv": "not z85!", "cardinality": 1})
    with pytest.raises(CorruptDeletionVectorError, match="magic"):
        read_deletion_vector(storage, {"storageType": "i", "pathOrInlineDv": z85_encode(b"\0" * 8), "cardinality": 0})
