"""A schema's fields, nested ones included, each with what identifies it across versions, and
two schemas compared field by field: columns added, dropped, renamed, retyped (widened or
not) and their nullability changed.

Identity (protocol "Column Mapping"): with column mapping on (mode `name` or `id`) a field is
the same column across versions while its `delta.columnMapping.id` (else its physical name
path) is the same, whatever its logical name; a new logical name is a rename. Without column
mapping a field is its path of names (Delta records a rename there as a drop and an add). A
field that carries no mapping metadata on one side (mapping switched on in between) is
matched by its path of names.

Types (protocol "Type Widening"): array elements and map keys and values are positions of
their field (`fieldPath` `element`, `key`, `value`, dotted when nested, as in
`delta.typeChanges`); a struct's fields are columns of their own. A type change is a widening
when the protocol allows it or when `delta.typeChanges` recorded it.

Pure: schema dicts in, plain dicts out. A log is untrusted: names and types shown back are
bounded (text_bounds), and a schema nested deeper than the log's lines may be is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from tables.delta.errors import CorruptLogError
from tables.delta.log.actions import Metadata
from tables.delta.log.jsonline import MAX_NESTING, deeper_than
from tables.delta.snapshot.schema.columnmapping import FIELD_ID, PHYSICAL_NAME
from tables.delta.text_bounds import MAX_ECHOED_VALUE, cut

TYPE_CHANGES = "delta.typeChanges"
_INTEGERS = ("byte", "short", "integer", "long")
_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")


@dataclass(frozen=True, slots=True)
class FieldInfo:
    """One struct field of a schema (top-level or nested), as the comparison needs it."""

    path: tuple[str, ...]  # logical names, with element/key/value steps through containers
    key: tuple[Any, ...] | None  # ("id", n) or ("physical", path) with column mapping on, else None
    physical_name: str | None
    field_id: int | None
    dtype: Any
    nullable: bool
    type_changes: tuple[tuple[str, str, str], ...]  # (fieldPath, fromType, toType) as recorded
    metadata: dict[str, Any]

    @property
    def name(self) -> str:
        return self.path[-1]


def parse_schema(md: Metadata, where: str = "") -> dict[str, Any]:
    """A metaData's schema as a dict; a schemaString that is not a JSON object, or nests deeper
    than a log line may, is a corrupt log (named by `where`)."""
    try:
        schema = orjson.loads(md.schema_string)
    except orjson.JSONDecodeError as exc:
        raise CorruptLogError(f"{where}: the metaData's schemaString is not JSON ({exc})".lstrip(": ")) from exc
    if not isinstance(schema, dict):
        raise CorruptLogError(f"{where}: the metaData's schemaString is not a struct".lstrip(": "))
    if deeper_than(schema, MAX_NESTING):
        # the walks below recurse once per level: a deeper schema must stop here, named
        raise CorruptLogError(f"{where}: the schema nests more than {MAX_NESTING} levels".lstrip(": "))
    return schema


def _text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _type_changes(meta: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    entries = meta.get(TYPE_CHANGES)
    if not isinstance(entries, list):
        return ()
    out = []
    for e in entries:
        if (
            isinstance(e, dict)
            and isinstance(e.get("fromType"), str | dict)
            and isinstance(e.get("toType"), str | dict)
        ):
            at = e.get("fieldPath")
            out.append((at if isinstance(at, str) else "", type_text(e["fromType"]), type_text(e["toType"])))
    return tuple(out)


def flatten(schema: dict[str, Any], mode: str) -> list[FieldInfo]:
    """Every struct field of `schema`, depth first in schema order; `mode` is the column
    mapping mode in force ('none', 'name', 'id'), which decides what identifies a field."""
    out: list[FieldInfo] = []

    def walk(dtype: Any, path: tuple[str, ...], ppath: tuple[str, ...]) -> None:
        if not isinstance(dtype, dict):
            return
        kind = dtype.get("type")
        if kind == "struct" and isinstance(dtype.get("fields"), list):
            for f in dtype["fields"]:
                if isinstance(f, dict):
                    field(f, path, ppath)
        elif kind == "array":
            walk(dtype.get("elementType"), (*path, "element"), (*ppath, "element"))
        elif kind == "map":
            walk(dtype.get("keyType"), (*path, "key"), (*ppath, "key"))
            walk(dtype.get("valueType"), (*path, "value"), (*ppath, "value"))

    def field(f: dict[str, Any], path: tuple[str, ...], ppath: tuple[str, ...]) -> None:
        name = _text(f.get("name"))
        meta = f.get("metadata") if isinstance(f.get("metadata"), dict) else {}
        phys = meta.get(PHYSICAL_NAME) if isinstance(meta.get(PHYSICAL_NAME), str) else None
        fid = meta.get(FIELD_ID) if type(meta.get(FIELD_ID)) is int else None
        here, phere = (*path, name), (*ppath, phys or name)
        key: tuple[Any, ...] | None = None
        if mode != "none":
            key = ("id", fid) if fid is not None else ("physical", phere) if phys else None
        nullable = f.get("nullable", True) is not False
        out.append(FieldInfo(here, key, phys, fid, f.get("type"), nullable, _type_changes(meta), meta))
        walk(f.get("type"), here, phere)

    walk(schema, (), ())
    return out


def type_text(dtype: Any) -> str:
    """A Delta type as Spark's simple string (`long`, `decimal(10,2)`, `array<int>`,
    `map<string,long>`, `struct<a:int>`), bounded."""

    def text(t: Any) -> str:
        if isinstance(t, str):
            return t.strip().lower().replace(" ", "")
        if isinstance(t, dict):
            kind = t.get("type")
            if kind == "array":
                return f"array<{text(t.get('elementType'))}>"
            if kind == "map":
                return f"map<{text(t.get('keyType'))},{text(t.get('valueType'))}>"
            if kind == "struct":
                inner = ",".join(
                    f"{_text(f.get('name'))}:{text(f.get('type'))}"
                    for f in t.get("fields") or []
                    if isinstance(f, dict)
                )
                return f"struct<{inner}>"
        return _text(t)

    return cut(text(dtype), MAX_ECHOED_VALUE)


def is_widening(a: str, b: str) -> bool:
    """Whether type `a` -> `b` is a widening the protocol's Type Widening allows."""
    if a in _INTEGERS and b in _INTEGERS:
        return _INTEGERS.index(a) < _INTEGERS.index(b)
    if (a, b) in (("float", "double"), ("date", "timestamp_ntz")) or (a in _INTEGERS[:3] and b == "double"):
        return True
    db = _DECIMAL.match(b)
    if db is None:
        return False
    p2, s2 = int(db.group(1)), int(db.group(2))
    da = _DECIMAL.match(a)
    if da is not None:
        p1, s1 = int(da.group(1)), int(da.group(2))
        return (p1, s1) != (p2, s2) and p2 - p1 >= s2 - s1 >= 0
    # Decimal(10 + k1, k2) with k1 >= k2 >= 0 from byte, short, int; Decimal(20 + k1, k2) from long
    digits = 20 if a == "long" else 10 if a in _INTEGERS else None
    return digits is not None and p2 - s2 >= digits


def _kind(t: Any) -> str | None:
    return t.get("type") if isinstance(t, dict) else None


def _at(base: str, step: str) -> str:
    return f"{base}.{step}" if base else step


def type_diffs(a: Any, b: Any, at: str = "") -> list[tuple[str, str, Any, Any]]:
    """(what, fieldPath, from, to) between two types of one field, through arrays and maps:
    what is 'type' (a position's type changed) or 'nullability' (an element's or a map
    value's containsNull). A struct's own fields are not looked into (they are fields)."""
    ka, kb = _kind(a), _kind(b)
    out: list[tuple[str, str, Any, Any]] = []
    if ka == kb == "array":
        here = _at(at, "element")
        out += type_diffs(a.get("elementType"), b.get("elementType"), here)
        na, nb = a.get("containsNull", True) is not False, b.get("containsNull", True) is not False
        if na != nb:
            out.append(("nullability", here, na, nb))
    elif ka == kb == "map":
        out += type_diffs(a.get("keyType"), b.get("keyType"), _at(at, "key"))
        here = _at(at, "value")
        out += type_diffs(a.get("valueType"), b.get("valueType"), here)
        na, nb = a.get("valueContainsNull", True) is not False, b.get("valueContainsNull", True) is not False
        if na != nb:
            out.append(("nullability", here, na, nb))
    elif ka == kb == "struct":
        pass
    else:
        ta, tb = type_text(a), type_text(b)
        if ka == "struct" or kb == "struct" or ta != tb:
            out.append(("type", at, ta, tb))
    return out


def match_fields(old: list[FieldInfo], new: list[FieldInfo]) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """(pairs (old index, new index) in new order, old indexes dropped, new indexes added).

    First by mapping identity where both sides have one; then by path of names, but only where
    one side has no mapping identity: with mapping on both sides, the same name under another id
    is another column (dropped and added again)."""
    by_key = {f.key: i for i, f in enumerate(old) if f.key is not None}
    used: set[int] = set()
    pairs: list[tuple[int, int]] = []
    waiting: list[int] = []
    for j, g in enumerate(new):
        i = by_key.get(g.key) if g.key is not None else None
        if i is not None and i not in used:
            pairs.append((i, j))
            used.add(i)
        else:
            waiting.append(j)
    by_path = {f.path: i for i, f in enumerate(old) if i not in used}
    added = []
    for j in waiting:
        i = by_path.get(new[j].path)
        if i is not None and (old[i].key is None or new[j].key is None):
            pairs.append((i, j))
            used.add(i)
            del by_path[new[j].path]
        else:
            added.append(j)
    pairs.sort(key=lambda p: p[1])
    return pairs, [i for i in range(len(old)) if i not in used], added


def shown_path(path: tuple[str, ...]) -> list[str]:
    """A field path as the answers show it: each name bounded."""
    return [cut(p, MAX_ECHOED_VALUE) for p in path]


def path_text(path: tuple[str, ...] | list[str]) -> str:
    """A field path as one string: names joined with dots, a name holding a dot or a backtick
    backquoted (as Spark writes a column reference)."""
    return ".".join(p if p and re.fullmatch(r"[^.`]+", p) else "`" + p.replace("`", "``") + "`" for p in path)


def pair_changes(f: FieldInfo, g: FieldInfo) -> list[dict[str, Any]]:
    """What changed of one column from field `f` to field `g` (the same column)."""
    out: list[dict[str, Any]] = []
    if f.name != g.name:
        out.append(
            {
                "kind": "renamed",
                "fromName": cut(f.name, MAX_ECHOED_VALUE),
                "toName": cut(g.name, MAX_ECHOED_VALUE),
                "fromPath": shown_path(f.path),
            }
        )
    recorded_now = set(g.type_changes) - set(f.type_changes)
    for what, at, a, b in type_diffs(f.dtype, g.dtype):
        if what == "nullability":
            out.append({"kind": "nullability_changed", "fieldPath": at, "from": a, "to": b})
            continue
        recorded = (at, a, b) in recorded_now
        kind = "type_widened" if recorded or is_widening(a, b) else "type_changed"
        out.append({"kind": kind, "fieldPath": at, "fromType": a, "toType": b, "recorded": recorded})
    if f.nullable != g.nullable:
        out.append({"kind": "nullability_changed", "fieldPath": "", "from": f.nullable, "to": g.nullable})
    return out


def appeared(g: FieldInfo) -> dict[str, Any]:
    return {"kind": "added", "type": type_text(g.dtype), "nullable": g.nullable}


def dropped(f: FieldInfo) -> dict[str, Any]:
    return {"kind": "dropped", "type": type_text(f.dtype), "nullable": f.nullable}


def diff_fields(old: list[FieldInfo], new: list[FieldInfo]) -> list[dict[str, Any]]:
    """Every change from one schema's fields to another's: in the new schema's order (added,
    renamed, retyped, nullability), then the dropped fields in the old schema's order. Each
    change names the field's `path` (the new one; the old one for a dropped field)."""
    pairs, gone, added = match_fields(old, new)
    changes: list[tuple[int, dict[str, Any]]] = []
    for i, j in pairs:
        changes += [(j, {**c, "path": shown_path(new[j].path)}) for c in pair_changes(old[i], new[j])]
    changes += [(j, {**appeared(new[j]), "path": shown_path(new[j].path)}) for j in added]
    changes.sort(key=lambda c: c[0])
    return [c for _j, c in changes] + [{**dropped(old[i]), "path": shown_path(old[i].path)} for i in gone]


def diff_schemas(old: dict[str, Any], old_mode: str, new: dict[str, Any], new_mode: str) -> dict[str, Any]:
    """Two schemas compared: how columns were matched, and the changes (diff_fields)."""
    matched_by = "columnMapping" if old_mode != "none" and new_mode != "none" else "name"
    return {"matchedBy": matched_by, "changes": diff_fields(flatten(old, old_mode), flatten(new, new_mode))}
