#!/usr/bin/env bash
# Start redis-server (loopback), a Celery worker and the web server; Ctrl-C stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${1:-8000}
REDIS_PORT=${2:-6379}
PY=.venv/bin/python
mkdir -p var/tables var/log
export CELERY_BROKER_URL=${CELERY_BROKER_URL:-redis://127.0.0.1:$REDIS_PORT/0}
export DELTAWEB_DEBUG=${DELTAWEB_DEBUG:-1}
export DELTAWEB_STATIC_AUTOREFRESH=${DELTAWEB_STATIC_AUTOREFRESH:-0}
export DELTAWEB_STATIC_FINDERS=${DELTAWEB_STATIC_FINDERS:-0}  # the collected files, compressed
# collected apart from var/static: a test run in this checkout keeps reading the apps' own files
export DELTAWEB_STATIC_ROOT=${DELTAWEB_STATIC_ROOT:-var/run-static}

pids=()
cleanup() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "stopped."
}
trap cleanup INT TERM EXIT

echo "[run 1/6] redis on port $REDIS_PORT"
if ! redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir var >var/log/redis.log 2>&1 &
  pids+=($!)
fi
echo "[run 2/6] the database (var/deltaweb.sqlite3)"
$PY manage.py migrate --noinput >/dev/null
echo "[run 3/6] static files, hashed and compressed (plotly.js 4.8 MB goes out gzipped)"
$PY manage.py collectstatic --noinput >/dev/null
echo "[run 4/6] roles and demo users"
$PY manage.py create_roles --demo-users | grep -v '^group'
echo "[run 5/6] the demo table"
$PY manage.py bootstrap_demo || echo "the demo table was not created (see the message above)"
echo "[run 6/6] a Celery worker, the beat and the web server"
$PY -m celery -A deltaweb worker --loglevel=info --concurrency=2 >var/log/worker.log 2>&1 &
pids+=($!)
$PY -m celery -A deltaweb beat --loglevel=info --schedule var/celerybeat-schedule >var/log/beat.log 2>&1 &
pids+=($!)
echo "deltaweb is running at http://127.0.0.1:$PORT/  (Ctrl-C stops it; logs in var/log/)"
# --nostatic: WhiteNoise serves the collected files, compressed, as in a deployment
$PY manage.py runserver "127.0.0.1:$PORT" --noreload --nostatic &
pids+=($!)
wait -n "${pids[@]}"
