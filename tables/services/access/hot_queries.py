"""The lookups every request makes, written out in SQL: the session and its user (with its
roles), the API token's user (with its roles), the registered table by id or slug, and a
catalogManaged table's owner row (with its location).

Through the ORM each cost 1-2 ms of query compiling (the owner row joined all 46 columns of
its table), most of what a history page of the API, a commit attempt or a getCommits spent on
the server; a losing writer's conflict and reload pay for them twice. Written out, each is one
statement of a few hundred microseconds. The rows are still model instances: related rows (a
table's creator, the owner row's table beyond its id and location) load on first use.
"""

from __future__ import annotations

from functools import cache

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.sessions.models import Session
from django.core.exceptions import ValidationError
from django.db import connection, connections
from django.utils import timezone
from rest_framework.authtoken.models import Token

from tables.models import ManagedTable, Table, TokenExpiry
from tables.services.access.roles import ROLES


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _first(model, sql: str, params: list):
    """The first instance `sql` gives, or None: what `model.objects.raw(sql, params)` would
    give first, without working out again on every call how its columns map to the model
    (a `raw()` query spent three quarters of its time on that, not in the database)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
        if row is None:
            return None
        plan = _plans.get((model, connection.alias, sql))
        if plan is None:  # a statement's columns are the same on every run
            names = tuple(connection.introspection.identifier_converter(d[0]) for d in cursor.description)
            plan = _plans[(model, connection.alias, sql)] = _row_plan(model, connection.alias, names)
    init_names, init_pos, extras, converters = plan
    values = list(row)
    for pos, funcs in converters:
        for func in funcs:
            values[pos] = func(values[pos], None, connection)
    instance = model.from_db(connection.alias, init_names, [values[p] for p in init_pos])
    for name, pos in extras:
        setattr(instance, name, values[pos])
    return instance


_plans: dict[tuple[type, str, str], tuple] = {}


def _row_plan(model, alias: str, names: tuple[str, ...]):
    """For rows of these columns: the model's attribute names and their positions, the other
    columns (set as attributes) and each column's converters (as `raw()` works them out)."""
    fields = {f.column: f for f in model._meta.concrete_fields}
    init = [(f.attname, names.index(f.column)) for f in model._meta.fields if f.column in names]
    if model._meta.pk.attname not in {n for n, _p in init}:
        raise ValueError(f"a row of {model.__name__} must include its primary key")
    extras = [(n, pos) for pos, n in enumerate(names) if n not in fields]
    conn = connections[alias]
    converters = []
    for pos, n in enumerate(names):
        field = fields.get(n)
        if field is not None:
            col = field.get_col(model._meta.db_table)
            funcs = conn.ops.get_db_converters(col) + col.get_db_converters(conn)
            if funcs:
                converters.append((pos, funcs))
    return [n for n, _p in init], [p for _n, p in init], extras, converters


@cache
def _user_sql(vendor: str, by: str) -> str:
    """The user with its role memberships, by API token key ("token") or by id ("id")."""
    user_model = get_user_model()
    members = user_model.groups.through._meta
    user_pk = f"u.{_q(user_model._meta.pk.column)}"
    member = f"ug.{_q(members.get_field(user_model.__name__.lower()).column)}"
    roles = ", ".join(
        f"EXISTS(SELECT 1 FROM {_q(members.db_table)} ug JOIN {_q(Group._meta.db_table)} g "
        f"ON g.{_q('id')} = ug.{_q('group_id')} WHERE {member} = {user_pk} AND g.{_q('name')} = %s) AS role_{i}"
        for i in range(len(ROLES))
    )
    if by == "token":  # an expired token finds nobody (tables.services.access.api_tokens)
        source = (
            f"JOIN {_q(Token._meta.db_table)} t ON t.{_q('user_id')} = {user_pk} "
            f"LEFT JOIN {_q(TokenExpiry._meta.db_table)} e ON e.{_q('token_key')} = t.{_q('key')} "
            f"WHERE t.{_q('key')} = %s AND (e.{_q('expires_at')} IS NULL OR e.{_q('expires_at')} > %s)"
        )
    else:
        source = f"WHERE {user_pk} = %s"
    return f"SELECT u.*, {roles} FROM {_q(user_model._meta.db_table)} u {source}"


def _with_roles(by: str, value: object):
    params = [*ROLES, value]
    if by == "token":
        params.append(connection.ops.adapt_datetimefield_value(timezone.now()))
    user = _first(get_user_model(), _user_sql(connection.vendor, by), params)
    if user is not None:
        user.known_groups = {role: bool(getattr(user, f"role_{i}")) for i, role in enumerate(ROLES)}
    return user


def token_user(key: str):
    """The user of API token `key`, its role memberships in `known_groups` (roles.in_group
    answers from them); None for an unknown token."""
    return _with_roles("token", key)


def user_row(pk: object):
    """The user with this id (as a session stores it), its roles in `known_groups`; None if
    there is none."""
    try:
        pk = get_user_model()._meta.pk.to_python(pk)
    except ValidationError:
        return None
    return _with_roles("id", pk)


@cache
def _table_sql(vendor: str, by: str) -> str:
    return f"SELECT * FROM {_q(Table._meta.db_table)} WHERE {_q(by)} = %s"


def table_row(*, pk: int | None = None, slug: str | None = None) -> Table | None:
    """The registered table with this id or slug (its creator loads on first use)."""
    by, value = ("id", pk) if pk is not None else ("slug", slug)
    return _first(Table, _table_sql(connection.vendor, by), [value])


_BY = {"id": ("owner_table_id",), "name": ("uc_catalog", "uc_schema", "uc_name")}


@cache
def _managed_sql(vendor: str, by: str) -> str:
    where = " AND ".join(f"m.{_q(column)} = %s" for column in _BY[by])
    return (
        f"SELECT m.*, t.{_q('location')} AS table_location FROM {_q(ManagedTable._meta.db_table)} m "
        f"JOIN {_q(Table._meta.db_table)} t ON t.{_q('id')} = m.{_q('table_id')} WHERE {where}"
    )


def managed_row(*, owner_table_id: str | None = None, uc_name: tuple[str, str, str] | None = None):
    """The owner row of the table with this owner table id, or with this catalog.schema.name;
    None if there is none. Its `table` is loaded with the id and location only."""
    if owner_table_id is not None:
        by, params = "id", [owner_table_id]
    elif uc_name is not None:
        by, params = "name", list(uc_name)
    else:
        raise TypeError("managed_row needs owner_table_id or uc_name")
    mt = _first(ManagedTable, _managed_sql(connection.vendor, by), params)
    if mt is not None:
        mt.table = Table.from_db(connection.alias, ["id", "location"], [mt.table_id, mt.table_location])
    return mt


@cache
def _session_sql(vendor: str) -> str:
    return f"SELECT * FROM {_q(Session._meta.db_table)} WHERE {_q('session_key')} = %s AND {_q('expire_date')} > %s"


def session_row(key: str | None) -> Session | None:
    """The unexpired session with this key, or None."""
    if not key:
        return None
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    return _first(Session, _session_sql(connection.vendor), [key, now])
