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

pids=()
cleanup() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "stopped."
}
trap cleanup INT TERM EXIT

if ! redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir var >var/log/redis.log 2>&1 &
  pids+=($!)
fi
$PY manage.py migrate --noinput >/dev/null
$PY manage.py create_roles --demo-users | grep -v '^group'
$PY manage.py bootstrap_demo || echo "the demo table was not created (see the message above)"
$PY -m celery -A deltaweb worker --loglevel=info --concurrency=2 >var/log/worker.log 2>&1 &
pids+=($!)
$PY -m celery -A deltaweb beat --loglevel=info --schedule var/celerybeat-schedule >var/log/beat.log 2>&1 &
pids+=($!)
echo "deltaweb is running at http://127.0.0.1:$PORT/  (Ctrl-C stops it; logs in var/log/)"
$PY manage.py runserver "127.0.0.1:$PORT" --noreload &
pids+=($!)
wait -n "${pids[@]}"
