#!/usr/bin/env bash
# Start redis-server (loopback), the database, static files, roles and demo table in one process
# (scripts/prepare_run.py), the web server and the beat, then the Spark Connect server
# (scripts/spark_connect.sh: Spark as one service the worker is a client of, refusing clients
# without its token; SPARK_CONNECT=0 runs Spark in the worker instead) and the Celery worker;
# Ctrl-C stops them all. The first page answers before Spark's JVM starts.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${1:-8000}
REDIS_PORT=${2:-6379}
PY=.venv/bin/python
mkdir -p var/tables var/log
export CELERY_BROKER_URL=${CELERY_BROKER_URL:-redis://127.0.0.1:$REDIS_PORT/0}
export DELTAWEB_DEBUG=${DELTAWEB_DEBUG:-1}
export DELTAWEB_DEMO=${DELTAWEB_DEMO:-1}  # the sign-in page names the demo users
export DELTAWEB_STATIC_AUTOREFRESH=${DELTAWEB_STATIC_AUTOREFRESH:-0}
export DELTAWEB_STATIC_FINDERS=${DELTAWEB_STATIC_FINDERS:-0}  # the collected files, compressed
# collected apart from var/static: a test run in this checkout keeps reading the apps' own files
export DELTAWEB_STATIC_ROOT=${DELTAWEB_STATIC_ROOT:-var/run-static}

pids=()
connect=""
redis_supervisor=""
cleanup() {
  local rc=$?
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [ -n "${redis_supervisor:-}" ]; then kill "$redis_supervisor" 2>/dev/null || true; fi
  if [ -n "$connect" ]; then scripts/spark_connect.sh stop; fi
  wait 2>/dev/null || true
  echo "stopped."
  # and nothing after: an interrupt while the Spark Connect server starts would otherwise go on
  # to start the worker, left running alone
  exit "$rc"
}
trap cleanup INT TERM EXIT

echo "[run 1/7] redis on port $REDIS_PORT"
if ! redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  # supervised, as a service manager would: a Redis that dies is started again after 2 s, and
  # meanwhile the pages still answer and /readyz says the broker is down (the stack stays up)
  (
    child=""
    trap '[ -n "$child" ] && kill "$child" 2>/dev/null; exit 0' TERM INT
    while true; do
      redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no --dir var >>var/log/redis.log 2>&1 &
      child=$!
      wait "$child" || true
      echo "$(date -u +%FT%TZ) redis-server ended; starting it again in 2 s" >>var/log/redis.log
      sleep 2
    done
  ) &
  redis_supervisor=$!
fi
if [ "${SPARK_CONNECT:-1}" != "0" ] && [ -z "${DELTAWEB_SPARK_REMOTE:-}" ]; then
  # started once the web server answers (its JVM's start took the CPU the steps below need),
  # waited for before the worker; its port chosen now, so the web process knows the URL
  connect=started
  # the server refuses clients without its token: DELTAWEB_SPARK_CONNECT_TOKEN, else the one
  # generated into var/spark-connect.token (mode 0600) the first time, kept for the next runs
  if [ -z "${DELTAWEB_SPARK_CONNECT_TOKEN:-}" ]; then
    if [ ! -s var/spark-connect.token ]; then
      (umask 077 && $PY -c "import secrets; print(secrets.token_urlsafe(32))" >var/spark-connect.token)
    fi
    export DELTAWEB_SPARK_CONNECT_TOKEN
    DELTAWEB_SPARK_CONNECT_TOKEN=$(cat var/spark-connect.token)
  fi
  export DELTAWEB_SPARK_REMOTE
  if ! DELTAWEB_SPARK_REMOTE=$(scripts/spark_connect.sh status 2>/dev/null); then
    port=${SPARK_CONNECT_PORT:-15002}
    if [ -z "${SPARK_CONNECT_PORT:-}" ]; then
      while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
    fi
    export SPARK_CONNECT_PORT=$port
    DELTAWEB_SPARK_REMOTE=sc://127.0.0.1:$port
  fi
fi
# one process: Django started once, its checks run once (scripts/prepare_run.py)
$PY scripts/prepare_run.py || exit 1
echo "[run 6/7] the web server and the beat"
$PY -m celery -A deltaweb beat --loglevel=info --schedule var/celerybeat-schedule >var/log/beat.log 2>&1 &
pids+=($!)
# --nostatic: WhiteNoise serves the collected files, compressed, as in a deployment;
# deltaweb/devserver.py: runserver with TCP_NODELAY (a sharing recipient's files were ~0.5 s each);
# --skip-checks: scripts/prepare_run.py ran them
$PY -m deltaweb.devserver "127.0.0.1:$PORT" --noreload --nostatic --skip-checks &
pids+=($!)
for _ in $(seq 600); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  kill -0 "${pids[-1]}" 2>/dev/null || break
  sleep 0.1
done
echo "deltaweb is running at http://127.0.0.1:$PORT/  (Ctrl-C stops it; logs in var/log/)"
if [ -n "$connect" ]; then
  echo "[run 7/7] the Spark Connect server (var/spark-connect/server.log), then the Celery worker, its client"
  if scripts/spark_connect.sh start >var/log/spark-connect.url 2>var/log/spark-connect.err; then
    echo "  Spark runs in the Connect server at $DELTAWEB_SPARK_REMOTE"
  else
    cat var/log/spark-connect.err >&2
    echo "  the Spark Connect server did not start: the worker runs its own Spark session"
    unset DELTAWEB_SPARK_REMOTE
  fi
else
  echo "[run 7/7] the Celery worker (Spark: ${DELTAWEB_SPARK_REMOTE:-a session in the worker, SPARK_CONNECT=0})"
fi
$PY -m celery -A deltaweb worker --loglevel=info --concurrency=2 >var/log/worker.log 2>&1 &
pids+=($!)
echo "  the worker is up (var/log/worker.log)"
wait -n "${pids[@]}"
