#!/usr/bin/env bash
# A private PostgreSQL for the test suite: Debian's server binaries, a data directory under
# var/postgres (PG_ROOT), loopback only, on its own port (PG_PORT, default 55432).
#   scripts/postgres.sh start   -> prints the DATABASE_URL to use (starts the server if needed)
#   scripts/postgres.sh stop
# PostgreSQL refuses to run as root, so as root the server runs as the `postgres` system user
# (created by Debian's package) and owns var/postgres. Authentication is `trust` on loopback:
# a throwaway database for tests, never a deployment (docker-compose has its own).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PG_PORT:-55432}
ROOT=${PG_ROOT:-$PWD/var/postgres}
DATA=$ROOT/data
DB=deltaweb

bindir() {
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/pg_ctl" ]; then
    pg_config --bindir
    return
  fi
  # Debian keeps the server binaries out of PATH, one directory per major version
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -n "$dir" ] || { echo "PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
  echo "$dir"
}
BIN=$(bindir)

as_owner() {
  if [ "$(id -u)" = "0" ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

case "${1:-start}" in
  start)
    mkdir -p "$ROOT"
    if [ "$(id -u)" = "0" ]; then chown postgres: "$ROOT"; fi
    if [ ! -f "$DATA/PG_VERSION" ]; then
      as_owner "$BIN/initdb" -D "$DATA" -U "$DB" -A trust -E UTF8 --no-sync >"$ROOT/initdb.log" 2>&1 ||
        { cat "$ROOT/initdb.log" >&2; exit 1; }
    fi
    if as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
      PORT=$(sed -n 4p "$DATA/postmaster.pid")  # the port it was started on
    else
      # another checkout's server (or anything else) on the port: the next free one, unless
      # PG_PORT asked for this one
      if [ -z "${PG_PORT:-}" ]; then
        while (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do PORT=$((PORT + 1)); done
      fi
      # durability off: a test database is thrown away, and fsyncs would dominate its time
      as_owner "$BIN/pg_ctl" -D "$DATA" -l "$ROOT/server.log" -w -t 60 start -o \
        "-p $PORT -k $ROOT -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off \
         -c full_page_writes=off -c max_connections=200" >/dev/null ||
        { tail -20 "$ROOT/server.log" >&2; exit 1; }
    fi
    as_owner "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U "$DB" -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1 ||
      as_owner "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U "$DB" "$DB"
    echo "postgres://$DB@127.0.0.1:$PORT/$DB"
    ;;
  stop)
    if [ -f "$DATA/PG_VERSION" ]; then as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null || true; fi
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
