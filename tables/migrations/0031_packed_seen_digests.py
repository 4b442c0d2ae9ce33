"""First-seen digests packed per block of commits (SeenBlock) instead of one SeenCommit row per
commit; what a look found other than first seen kept sparse (SeenChange).

The data moves both ways. Forward, each table's SeenCommit rows, in version order, become blocks
of up to 1,000 commits; a block is cut where a row's chain entry does not follow from the one
before it, and a row whose entry follows from no stored entry is a block of its own that keeps
it (`previous` blank), so every entry is kept. A row found gone, with other bytes, or listed
with another size than first seen becomes a SeenChange as well. Each row's `checked_at` is not
kept apart from its `hashed_ms` (the look set them together; the page shows the time last
hashed). Backward, the blocks become SeenCommit rows again, `checked_at` from the time last
hashed (or first seen) unless a SeenChange kept it.
"""

import hashlib
import struct
from datetime import UTC, datetime, timedelta

import django.db.models.deletion
from django.db import migrations, models

BLOCK = 1000
NONE = -(1 << 63)
GENESIS = "0" * 64
DOMAIN = b"deltaweb-chain-v1\n"


def _entry(previous, version, digest):
    raw = DOMAIN + bytes.fromhex(previous) + version.to_bytes(8, "big") + bytes.fromhex(digest)
    return hashlib.sha256(raw).hexdigest()


def _pack(values):
    return struct.pack(f"<{len(values)}q", *(NONE if v is None else v for v in values))


def _unpack(data, count):
    if not data:
        return [None] * count
    return [None if v == NONE else v for v in struct.unpack(f"<{count}q", bytes(data))]


def _ms(at):
    return int(at.timestamp() * 1000)


_OLD = ("version", "sha256", "entry", "size", "first_seen_at", "timestamp", "listed_size", "listed_time",
        "last_sha256", "hashed_ms", "checked_at", "gone_at", "expired")  # fmt: skip


def _block(SeenBlock, table_id, previous, rows):
    r = [dict(zip(_OLD, row, strict=True)) for row in rows]
    versions = [x["version"] for x in r]
    base = r[0]["first_seen_at"]
    offsets = [int((x["first_seen_at"] - base) / timedelta(microseconds=1)) for x in r]
    hashed = [x["hashed_ms"] for x in r]
    return SeenBlock(
        table_id=table_id,
        first_version=versions[0],
        last_version=versions[-1],
        count=len(r),
        versions=b"" if versions[-1] - versions[0] + 1 == len(r) else _pack(versions),
        digests=b"".join(bytes.fromhex(x["sha256"]) for x in r),
        previous=previous,
        entry=r[-1]["entry"],
        sizes=_pack([x["size"] for x in r]),
        timestamps=_pack([x["timestamp"] for x in r]),
        first_seen_at=base,
        seen_after=_pack(offsets) if any(offsets) else b"",
        listed_times=_pack([x["listed_time"] for x in r]),
        hashed=b"" if hashed == [_ms(x["first_seen_at"]) for x in r] else _pack(hashed),
        expired=bytes(1 if x["expired"] else 0 for x in r) if any(x["expired"] for x in r) else b"",
    )


def _changed(x):
    """Whether a SeenCommit row's state is more than its block keeps."""
    return (
        x["gone_at"] is not None
        or x["last_sha256"] not in ("", x["sha256"])
        or (x["listed_size"] is None) != (x["listed_time"] is None)
        or (x["listed_size"] is not None and x["listed_size"] != x["size"])
    )


def pack(apps, schema_editor):
    SeenCommit = apps.get_model("tables", "SeenCommit")
    SeenBlock = apps.get_model("tables", "SeenBlock")
    SeenChange = apps.get_model("tables", "SeenChange")
    for table_id in SeenCommit.objects.values_list("table_id", flat=True).distinct().order_by("table_id"):
        blocks, changes, run, run_previous, previous = [], [], [], GENESIS, GENESIS
        rows = SeenCommit.objects.filter(table_id=table_id).order_by("version").values_list(*_OLD)
        for row in rows.iterator(chunk_size=5000):
            x = dict(zip(_OLD, row, strict=True))
            if _changed(x):
                changes.append(SeenChange(table_id=table_id, **{k: x[k] for k in (
                    "version", "last_sha256", "listed_size", "listed_time", "hashed_ms", "checked_at", "gone_at")}))  # fmt: skip
            follows = x["entry"] == _entry(previous, x["version"], x["sha256"])
            if run and (len(run) >= BLOCK or not follows):
                blocks.append(_block(SeenBlock, table_id, run_previous, run))
                run = []
            if not run:
                run_previous = previous if follows else ""
            run.append(row)
            previous = x["entry"]
            if not follows:  # kept as it is, in a block of its own
                blocks.append(_block(SeenBlock, table_id, "", run))
                run = []
            if len(blocks) >= 50:
                SeenBlock.objects.bulk_create(blocks)
                blocks = []
        if run:
            blocks.append(_block(SeenBlock, table_id, run_previous, run))
        SeenBlock.objects.bulk_create(blocks)
        SeenChange.objects.bulk_create(changes, batch_size=1000)


def unpack(apps, schema_editor):
    SeenCommit = apps.get_model("tables", "SeenCommit")
    SeenBlock = apps.get_model("tables", "SeenBlock")
    SeenChange = apps.get_model("tables", "SeenChange")
    changes = {(c.table_id, c.version): c for c in SeenChange.objects.all()}
    for b in SeenBlock.objects.order_by("table_id", "first_version").iterator(chunk_size=20):
        versions = _unpack(b.versions, b.count) if b.versions else list(range(b.first_version, b.last_version + 1))
        raw = bytes(b.digests)
        digests = [raw[i * 32 : i * 32 + 32].hex() for i in range(b.count)]
        offsets = _unpack(b.seen_after, b.count) if b.seen_after else [0] * b.count
        seen_at = [b.first_seen_at + timedelta(microseconds=o) for o in offsets]
        hashed = _unpack(b.hashed, b.count) if b.hashed else [_ms(at) for at in seen_at]
        sizes, stamps = _unpack(b.sizes, b.count), _unpack(b.timestamps, b.count)
        listed = _unpack(b.listed_times, b.count)
        expired = bytes(b.expired) if b.expired else bytes(b.count)
        previous, rows = b.previous, []
        for i, v in enumerate(versions):
            entry = _entry(previous, v, digests[i]) if b.previous else b.entry
            previous = entry
            row = SeenCommit(
                table_id=b.table_id, version=v, sha256=digests[i], entry=entry, size=sizes[i] or 0,
                first_seen_at=seen_at[i], timestamp=stamps[i],
                listed_size=sizes[i] if listed[i] is not None else None, listed_time=listed[i], last_sha256="",
                hashed_ms=hashed[i],
                checked_at=seen_at[i] if not b.hashed or hashed[i] is None else datetime.fromtimestamp(hashed[i] / 1000, UTC),
                expired=bool(expired[i]),
            )  # fmt: skip
            c = changes.get((b.table_id, v))
            if c is not None:
                for k in ("last_sha256", "listed_size", "listed_time", "hashed_ms", "checked_at", "gone_at"):
                    setattr(row, k, getattr(c, k))
            rows.append(row)
        SeenCommit.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)


class Migration(migrations.Migration):

    dependencies = [
        ('tables', '0030_plural_names'),
    ]

    operations = [
        migrations.CreateModel(
            name='SeenBlock',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('first_version', models.BigIntegerField()),
                ('last_version', models.BigIntegerField()),
                ('count', models.IntegerField()),
                ('versions', models.BinaryField(blank=True, default=b'', help_text='blank: first_version..last_version, each; else each version, packed')),
                ('digests', models.BinaryField(help_text="each commit file's SHA-256 when first seen, 32 bytes each")),
                ('previous', models.CharField(blank=True, help_text='the chain entry before the first version (blank: `entry` given, one commit)', max_length=64)),
                ('entry', models.CharField(help_text='the chain entry of the last version', max_length=64)),
                ('sizes', models.BinaryField(help_text="each commit file's size when first seen")),
                ('timestamps', models.BinaryField(help_text="each commit's time, ms (for its retention)")),
                ('first_seen_at', models.DateTimeField()),
                ('seen_after', models.BinaryField(blank=True, default=b'', help_text="blank: all first seen at first_seen_at; else each one's µs after it")),
                ('listed_times', models.BinaryField(help_text="each file's modification time as listed when last hashed, ms")),
                ('hashed', models.BinaryField(blank=True, default=b'', help_text='blank: each hashed when first seen; else when last hashed, ms')),
                ('expired', models.BinaryField(blank=True, default=b'', help_text='blank: none; else one byte each, 1: log cleanup removed it after its retention')),
                ('table', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='seen_blocks', to='tables.table')),
            ],
            options={
                'ordering': ['first_version'],
            },
        ),
        migrations.CreateModel(
            name='SeenChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('version', models.BigIntegerField()),
                ('last_sha256', models.CharField(blank=True, help_text='the digest the last read found (blank: none)', max_length=64)),
                ('listed_size', models.BigIntegerField(blank=True, null=True)),
                ('listed_time', models.BigIntegerField(blank=True, help_text="the file's modification time, ms", null=True)),
                ('hashed_ms', models.BigIntegerField(blank=True, help_text='when its bytes were last read and hashed, ms', null=True)),
                ('checked_at', models.DateTimeField(blank=True, null=True)),
                ('gone_at', models.DateTimeField(blank=True, help_text='found gone before its retention allowed', null=True)),
                ('table', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='seen_changes', to='tables.table')),
            ],
            options={
                'ordering': ['version'],
            },
        ),
        migrations.AddIndex(
            model_name='seenblock',
            index=models.Index(fields=['table', 'last_version'], name='seen_block_last'),
        ),
        migrations.AddConstraint(
            model_name='seenblock',
            constraint=models.UniqueConstraint(fields=('table', 'first_version'), name='seen_block_once'),
        ),
        migrations.AddConstraint(
            model_name='seenchange',
            constraint=models.UniqueConstraint(fields=('table', 'version'), name='seen_change_once'),
        ),
        migrations.RunPython(pack, unpack, elidable=False),
        migrations.DeleteModel(
            name='SeenCommit',
        ),
    ]
