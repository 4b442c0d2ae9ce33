"""A user's SQL checked and rewritten before anything runs: one read-only Spark SQL statement,
parsed with a real SQL parser (sqlglot, Spark dialect), never with regular expressions over the
text.

`parse_statement(text, resolve)` walks the parsed tree and refuses, naming the offending part:
- anything but one query (SELECT, WITH, set operations, VALUES): DDL, DML, SET, ADD JAR, CACHE,
  MSCK, REFRESH, CALL, a second statement, a script transform (`SELECT TRANSFORM ... USING`);
- `${...}` anywhere, even in a string: Spark substitutes variables, the environment's among them,
  into a statement's text;
- a path or file source (`parquet.\\`/path\\``, `read_files(...)`, any table-valued function);
- a function that is not one of Spark's pure built-ins on `ALLOWED_FUNCTIONS` (`reflect`,
  `java_method`, `input_file_name`, user-defined and unknown functions are refused); a
  function's name is taken from the statement as it will run (the tree printed back in Spark's
  dialect), so an alias sqlglot knows by another name is checked by the name Spark runs;
- a table reference that `resolve` refuses (not registered, not readable, a version that
  cannot be read), and identifiers in the namespace the rewrite uses (`__dw_`).

Every other table reference is a registered table (a slug, or a Unity Catalog name
catalog.schema.table) with an optional `VERSION AS OF n`, `VERSION AS OF 'pin name'` or
`TIMESTAMP AS OF '...'`. Each distinct (table, version) becomes one placeholder `__dw_t<i>`,
aliased by the name the query used (so `orders.region` still means that column), and the
statement is printed back from the tree (comments dropped): what was checked is what runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

PLACEHOLDER = "__dw_t"
MAX_LENGTH_DEFAULT = 20_000
MAX_NODES = 20_000
FILE_FORMATS = {"parquet", "csv", "json", "orc", "text", "avro", "delta", "binaryfile", "jdbc", "xml", "file"}

# Spark's built-in functions that read no file, call no code of the user's and reach nothing
# outside the query's rows (Spark 4's function registry, less reflect, java_method,
# try_reflect, input_file_name/block_start/block_length, from_protobuf/to_protobuf (they take a
# descriptor file), the xpath family (an XML parser) and the session-changing ones).
ALLOWED_FUNCTIONS = frozenset(
    """
    abs acos acosh add_months aes_decrypt aes_encrypt aggregate and any any_value approx_count_distinct
    approx_percentile array array_agg array_append array_compact array_contains array_distinct array_except
    array_insert array_intersect array_join array_max array_min array_position array_prepend array_remove
    array_repeat array_size array_sort array_union arrays_overlap arrays_zip ascii asin asinh atan atan2 atanh
    avg base64 between bigint bin binary bit_and bit_count bit_get bit_length bit_or bit_xor bitmap_bit_position
    bitmap_bucket_number bitmap_construct_agg bitmap_count bitmap_or_agg bool_and bool_or boolean bround btrim
    cardinality case cast cbrt ceil ceiling char char_length character_length chr coalesce collate collation
    collect_list collect_set concat concat_ws contains conv convert_timezone corr cos cosh cot count count_if
    count_min_sketch covar_pop covar_samp crc32 csc cume_dist curdate current_catalog current_database
    current_date current_schema current_timestamp current_timezone current_user date date_add date_diff
    date_format date_from_unix_date date_part date_sub date_trunc dateadd datediff datepart day dayname
    dayofmonth dayofweek dayofyear decimal decode degrees dense_rank div double e element_at elt encode
    endswith equal_null every exists exp explode explode_outer expm1 extract factorial filter find_in_set
    first first_value flatten float floor forall format_number format_string from_csv from_json
    from_unixtime from_utc_timestamp get get_json_object getbit greatest grouping grouping_id hash hex
    histogram_numeric hll_sketch_agg hll_sketch_estimate hll_union hll_union_agg hour hypot if ifnull ilike
    in initcap inline inline_outer instr int is_valid_utf8 is_variant_null isnan isnotnull isnull
    json_array_length json_object_keys json_tuple kurtosis lag last last_day last_value lcase lead least left
    len length levenshtein like ln localtimestamp locate log log10 log1p log2 lower lpad ltrim luhn_check
    make_date make_dt_interval make_interval make_timestamp make_timestamp_ltz make_timestamp_ntz
    make_valid_utf8 make_ym_interval map map_concat map_contains_key map_entries map_filter map_from_arrays
    map_from_entries map_keys map_values map_zip_with mask max max_by md5 mean median min min_by minute
    mod mode monotonically_increasing_id month monthname months_between named_struct nanvl negative
    next_day not now nth_value ntile nullif nullifzero nvl nvl2 octet_length or overlay parse_json
    parse_url percent_rank percentile percentile_approx percentile_cont percentile_disc pi pmod posexplode
    posexplode_outer position positive pow power printf quarter radians rand randn random randstr range rank
    reduce regexp regexp_count regexp_extract regexp_extract_all regexp_instr regexp_like regexp_replace
    regexp_substr regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy
    regr_syy repeat replace reverse right rint rlike round row_number rpad rtrim schema_of_csv
    schema_of_json schema_of_variant schema_of_variant_agg sec second sentences sequence sha sha1 sha2
    shiftleft shiftright shiftrightunsigned shuffle sign signum sin sinh size skewness slice smallint
    some sort_array soundex space spark_partition_id split split_part sqrt stack startswith std stddev
    stddev_pop stddev_samp str_to_map string struct substr substring substring_index sum tan tanh
    timestamp timestamp_micros timestamp_millis timestamp_seconds timestampadd timestampdiff tinyint
    to_binary to_char to_csv to_date to_json to_number to_timestamp to_timestamp_ltz to_timestamp_ntz
    to_unix_timestamp to_utc_timestamp to_varchar to_variant_object transform transform_keys
    transform_values translate trim trunc try_add try_aes_decrypt try_avg try_cast try_divide
    try_element_at try_make_interval try_make_timestamp try_make_timestamp_ltz try_make_timestamp_ntz
    try_mod try_multiply try_parse_json try_parse_url try_subtract try_sum try_to_binary try_to_number
    try_to_timestamp try_url_decode try_validate_utf8 try_variant_get typeof ucase unbase64 unhex
    uniform unix_date unix_micros unix_millis unix_seconds unix_timestamp upper url_decode url_encode uuid
    validate_utf8 var_pop var_samp variance variant_get version weekday weekofyear when width_bucket
    window window_time xxhash64 year zeroifnull zip_with
    """.split()
)
# what the tree prints for the constructs that are syntax rather than a call by name
_SYNTAX = (exp.Case, exp.Cast, exp.Extract, exp.Interval, exp.Bracket)
_FORBIDDEN = (
    exp.Command,
    exp.Create,
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Drop,
    exp.Set,
    exp.Merge,
    exp.Alter,
    exp.Use,
    exp.Describe,
    exp.Cache,
    exp.Uncache,
    exp.Refresh,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.LoadData,
    exp.Pragma,
    exp.TruncateTable,
    exp.Copy,
    exp.Show,
    exp.QueryTransform,  # SELECT TRANSFORM(...) USING 'script': runs a program on the executors
)
_CALL = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")


class QueryRefused(ValueError):
    """A statement refused before anything ran; `part` is the offending piece of it."""

    def __init__(self, message: str, part: str = "") -> None:
        super().__init__(message)
        self.message, self.part = message, part[:200]


@dataclass(frozen=True)
class Reference:
    """A table reference as written: its name, and how its version was asked."""

    name: str  # `slug` or `catalog.schema.table`
    by: str | None  # None (latest synced), "version", "pin" or "timestamp"
    value: str | int | None
    text: str  # the reference as the query wrote it


@dataclass
class Parsed:
    statement: str  # Spark SQL over the placeholders __dw_t0, __dw_t1, ...
    bindings: list[Any] = field(default_factory=list)  # what `resolve` answered, by placeholder index
    references: list[tuple[Reference, int]] = field(default_factory=list)  # each as written, its placeholder
    group_keys: list[str] = field(default_factory=list)  # the output columns the top query groups by


def _refuse(message: str, node: exp.Expression | None = None) -> QueryRefused:
    part = node.sql(dialect="spark")[:200] if node is not None else ""
    return QueryRefused(message, part)


def _one_statement(text: str) -> exp.Expression:
    try:
        trees = [t for t in sqlglot.parse(text, read="spark") if t is not None]
    except (ParseError, TokenError) as exc:
        raise QueryRefused(f"The statement is not valid Spark SQL: {str(exc).splitlines()[0][:300]}") from None
    except RecursionError:
        raise QueryRefused("The statement is nested too deeply.") from None
    if not trees:
        raise QueryRefused("Write one SELECT statement.")
    if len(trees) > 1:
        raise _refuse("One statement only: a second statement follows the first.", trees[1])
    return trees[0]


def _check_kind(tree: exp.Expression) -> None:
    if not isinstance(tree, exp.Query | exp.Values):
        raise _refuse("Only a query is allowed (SELECT, WITH, UNION, INTERSECT, EXCEPT, VALUES).", tree)
    for node in tree.walk():
        if isinstance(node, _FORBIDDEN):
            raise _refuse("Only a query is allowed: this part changes or configures something.", node)


def function_name(node: exp.Func) -> str | None:
    """The name Spark calls this function by, as the statement will run; None for syntax."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, _SYNTAX):
        return None
    m = _CALL.match(node.sql(dialect="spark"))
    return m.group(1).lower() if m else None


def _check_functions(tree: exp.Expression) -> None:
    for node in tree.find_all(exp.Func):
        name = function_name(node)
        if name is not None and name not in ALLOWED_FUNCTIONS:
            raise _refuse(
                f"The function {name} is not allowed: only Spark's pure built-in functions are "
                "(no reflection, no file access, no user-defined functions).",
                node,
            )


def _cte_names(tree: exp.Expression) -> set[str]:
    return {str(cte.alias_or_name).lower() for cte in tree.find_all(exp.CTE)}


def _reference(node: exp.Table) -> Reference:
    parts = [p.name for p in (node.args.get("catalog"), node.args.get("db")) if p is not None] + [node.name]
    if len(parts) == 2 and parts[0].lower() in FILE_FORMATS:
        raise _refuse("A path or file source is not allowed: name a registered table.", node)
    if len(parts) not in (1, 3):
        raise _refuse("Name a registered table by its slug or its catalog name (catalog.schema.table).", node)
    version = node.args.get("version")
    by: str | None = None
    value: str | int | None = None
    if version is not None:
        literal = version.expression
        kind = str(version.this).upper()
        if not isinstance(literal, exp.Literal) or kind not in ("VERSION", "TIMESTAMP"):
            raise _refuse("VERSION AS OF and TIMESTAMP AS OF take a literal: a number, a pin's name or a time.", node)
        if kind == "TIMESTAMP":
            if not literal.is_string:
                raise _refuse("TIMESTAMP AS OF takes a quoted time, e.g. '2026-09-30 23:59:59'.", node)
            by, value = "timestamp", literal.this
        elif literal.is_string:
            by, value = "pin", literal.this
        else:
            text = str(literal.this)
            if not (text.isascii() and text.isdigit()) or len(text) > 18:
                raise _refuse("VERSION AS OF takes a non-negative whole number or a pin's name.", node)
            by, value = "version", int(text)
    bare = node.copy()
    bare.set("alias", None)
    return Reference(".".join(parts), by, value, bare.sql(dialect="spark")[:200])


def group_keys(tree: exp.Expression) -> list[str]:
    """The output columns the outermost SELECT groups by: each GROUP BY expression that is also
    a selected column, by the name the result gives it (what two results are matched on)."""
    select = tree if isinstance(tree, exp.Select) else None
    group = select.args.get("group") if select is not None else None
    if group is None:
        return []
    wanted = {g.sql(dialect="spark") for g in group.expressions}
    out = []
    for item in select.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        if inner.sql(dialect="spark") in wanted or item.alias_or_name in wanted:
            out.append(item.alias_or_name)
    return out


def parse_statement(
    text: str, resolve: Callable[[Reference], tuple[Any, Any]], max_length: int = MAX_LENGTH_DEFAULT
) -> Parsed:
    """The statement checked and rewritten (module docstring). `resolve(reference)` answers
    (a key that is equal for the same table at the same version, what to bind) or raises
    QueryRefused with its reason."""
    if not isinstance(text, str) or not text.strip():
        raise QueryRefused("Write one SELECT statement.")
    if len(text) > max_length:
        raise QueryRefused(f"The statement is {len(text):,} characters long; at most {max_length:,} are allowed.")
    if "${" in text:
        # Spark substitutes ${var}, ${env:VAR} and ${system:prop} in a statement's text, even
        # inside string literals: it would read the server's environment into the result
        raise QueryRefused("${...} is not allowed: Spark would substitute variables there.", "${")
    tree = _one_statement(text)
    if sum(1 for _ in tree.walk()) > MAX_NODES:
        raise QueryRefused("The statement is too large.")
    _check_kind(tree)
    for ident in tree.find_all(exp.Identifier):
        if str(ident.name).lower().startswith("__dw_"):
            raise _refuse("Names starting with __dw_ are reserved.", ident)
    _check_functions(tree)
    ctes = _cte_names(tree)
    parsed = Parsed("", group_keys=group_keys(tree))
    keys: dict[Any, int] = {}
    for node in list(tree.find_all(exp.Table)):
        if not isinstance(node.this, exp.Identifier):
            raise _refuse("A table-valued function is not allowed: name a registered table.", node)
        is_cte = not node.args.get("db") and not node.args.get("catalog") and node.name.lower() in ctes
        if is_cte and node.args.get("version") is None:
            continue
        ref = _reference(node)
        key, binding = resolve(ref)
        if key not in keys:
            keys[key] = len(parsed.bindings)
            parsed.bindings.append(binding)
        parsed.references.append((ref, keys[key]))
        alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
        bound = exp.Table(this=exp.to_identifier(f"{PLACEHOLDER}{keys[key]}"), alias=alias)
        if node.args.get("sample") is not None:
            bound.set("sample", node.args["sample"])
        node.replace(bound)
    parsed.statement = tree.sql(dialect="spark", comments=False)
    if "${" in parsed.statement:  # escapes printed back as ${ (see above)
        raise QueryRefused("${...} is not allowed: Spark would substitute variables there.", "${")
    return parsed
