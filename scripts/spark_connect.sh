#!/usr/bin/env bash
# The Spark Connect server: Spark as one shared service the Celery workers are clients of
# (DELTAWEB_SPARK_REMOTE=sc://127.0.0.1:PORT), started with the pyspark installation's own
# spark-submit (no download; pyspark's pip package has no sbin/ start script) and the same
# configuration an in-process session gets (python -m tables.spark.engine.connect server-args).
#   scripts/spark_connect.sh start   -> prints the sc:// URL once the port answers (starts it if needed)
#   scripts/spark_connect.sh stop
#   scripts/spark_connect.sh status  -> prints the URL and exits 0 while it runs, else exits 1
# SPARK_CONNECT_PORT (default 15002; when not given and taken by something else, the next free
# one), SPARK_CONNECT_DIR (var/spark-connect: pid, URL and log), SPARK_MASTER (local[*], or the
# standalone cluster's spark:// URL), SPARK_CONNECT_START_TIMEOUT (seconds, 180).
# Bound to 127.0.0.1 only. DELTAWEB_SPARK_CONNECT_TOKEN (`make run` generates one into
# var/spark-connect.token): the server refuses every client that does not send it (Spark's
# SPARK_CONNECT_AUTHENTICATE_TOKEN, given to the server's environment only: never on a command
# line, in the URL file or the log); without it, anyone who can reach the port can run code as
# this user. A running server started with another token (or none) is not reused: stop it first.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
ROOT=${SPARK_CONNECT_DIR:-$PWD/var/spark-connect}
TIMEOUT=${SPARK_CONNECT_START_TIMEOUT:-180}
mkdir -p "$ROOT"

# what the running server's token is, without the token: its SHA-256, or "none"
fingerprint() {
  if [ -n "${DELTAWEB_SPARK_CONNECT_TOKEN:-}" ]; then
    printf %s "$DELTAWEB_SPARK_CONNECT_TOKEN" | sha256sum | cut -d' ' -f1
  else
    echo none
  fi
}

alive() { [ -f "$ROOT/server.pid" ] && kill -0 "$(cat "$ROOT/server.pid")" 2>/dev/null; }
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  if alive && [ -f "$ROOT/url" ]; then
    if [ "$(cat "$ROOT/token.sha256" 2>/dev/null || echo none)" != "$(fingerprint)" ]; then
      echo "the running Spark Connect server ($(cat "$ROOT/url")) was started with another token" \
        "(DELTAWEB_SPARK_CONNECT_TOKEN) or without one: stop it first ($0 stop)" >&2
      return 1
    fi
    cat "$ROOT/url"
    return 0
  fi
  local port=${SPARK_CONNECT_PORT:-15002}
  if [ -z "${SPARK_CONNECT_PORT:-}" ]; then
    while answers "$port"; do port=$((port + 1)); done  # another checkout's server, or anything else
  elif answers "$port"; then
    echo "port $port is taken by another process (SPARK_CONNECT_PORT)" >&2
    return 1
  fi
  local spark_home python
  spark_home=$($PY -c "import os, pyspark; print(os.path.dirname(pyspark.__file__))")
  python=$($PY -m tables.spark.engine.connect python)
  mapfile -t args < <(SPARK_CONNECT_PORT=$port $PY -m tables.spark.engine.connect server-args "${SPARK_MASTER:-}")
  : >"$ROOT/server.log"
  rm -f "$ROOT/url"
  (umask 077 && fingerprint >"$ROOT/token.sha256")
  # the token in the server's environment only (Spark reads SPARK_CONNECT_AUTHENTICATE_TOKEN)
  unset SPARK_CONNECT_AUTHENTICATE_TOKEN
  if [ -n "${DELTAWEB_SPARK_CONNECT_TOKEN:-}" ]; then
    export SPARK_CONNECT_AUTHENTICATE_TOKEN=$DELTAWEB_SPARK_CONNECT_TOKEN
  fi
  # the executors' Python as tables/spark/session.py names it (PySpark's workers read both)
  SPARK_HOME=$spark_home SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$python PYSPARK_DRIVER_PYTHON=$python \
    setsid "$spark_home/bin/spark-submit" "${args[@]}" >>"$ROOT/server.log" 2>&1 </dev/null 9>&- &
  echo $! >"$ROOT/server.pid"
  unset SPARK_CONNECT_AUTHENTICATE_TOKEN
  for _ in $(seq $((TIMEOUT * 10))); do
    if ! alive; then
      echo "the Spark Connect server stopped while starting:" >&2
      tail -20 "$ROOT/server.log" >&2
      return 1
    fi
    if answers "$port"; then
      echo "sc://127.0.0.1:$port" | tee "$ROOT/url"
      return 0
    fi
    sleep 0.1
  done
  echo "the Spark Connect server did not answer on port $port within $TIMEOUT s:" >&2
  tail -20 "$ROOT/server.log" >&2
  stop
  return 1
}

stop() {
  if alive; then
    local pid
    pid=$(cat "$ROOT/server.pid")
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$ROOT/server.pid" "$ROOT/url" "$ROOT/token.sha256"
}

case "${1:-start}" in
  start)
    # one start at a time (two test processes share one server)
    exec 9>"$ROOT/.lock"
    flock 9
    start
    ;;
  stop)
    exec 9>"$ROOT/.lock"
    flock 9
    stop
    ;;
  status)
    if alive && [ -f "$ROOT/url" ]; then cat "$ROOT/url"; else exit 1; fi
    ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
