#!/usr/bin/env bash
# A Spark standalone cluster on loopback for the test suite: one master and one worker (or
# SPARK_CLUSTER_WORKERS of them) started with the pyspark installation's own `spark-class` (no download), logs and work
# directories under var/spark-cluster.
#   scripts/spark-cluster.sh start  -> prints the SPARK_MASTER URL (starts them if needed)
#   scripts/spark-cluster.sh stop
# SPARK_CLUSTER_PORT (default 57077) is the master's port, SPARK_CLUSTER_DIR (var/spark-cluster)
# its pid files, logs and work directories (one per cluster); each worker offers
# SPARK_WORKER_CORES (2) and SPARK_WORKER_MEMORY (2g) to the executors. SPARK_CLUSTER_WORKERS
# (default 1) is how many workers start: the first is `worker` (work dir work/), the others
# worker2, worker3, ... (work2/, work3/, ...), each on its own random port; stop stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
PORT=${SPARK_CLUSTER_PORT:-57077}
WORKERS=${SPARK_CLUSTER_WORKERS:-1}
ROOT=${SPARK_CLUSTER_DIR:-$PWD/var/spark-cluster}
URL="spark://127.0.0.1:$PORT"
SPARK_HOME=$($PY -c "import os, pyspark; print(os.path.dirname(pyspark.__file__))")
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 SPARK_LOG_DIR=$ROOT/logs SPARK_PID_DIR=$ROOT
export SPARK_NO_DAEMONIZE=1

alive() { [ -f "$ROOT/$1.pid" ] && kill -0 "$(cat "$ROOT/$1.pid")" 2>/dev/null; }

wait_for() {  # wait_for <log> <text>: up to 60 s for a daemon to say it is up
  for _ in $(seq 600); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "Spark did not start: $1" >&2
  tail -20 "$1" >&2
  return 1
}

start_daemon() {  # start_daemon <name> <class> <args...>
  local name=$1
  shift
  : >"$ROOT/$name.log"
  setsid "$SPARK_HOME/bin/spark-class" "$@" >>"$ROOT/$name.log" 2>&1 </dev/null &
  echo $! >"$ROOT/$name.pid"
}

case "${1:-start}" in
  start)
    mkdir -p "$ROOT/work" "$ROOT/logs"
    if ! alive master; then
      start_daemon master org.apache.spark.deploy.master.Master \
        --host 127.0.0.1 --port "$PORT" --webui-port 0
      wait_for "$ROOT/master.log" "I have been elected leader"
    fi
    for i in $(seq "$WORKERS"); do
      suffix=$([ "$i" = 1 ] || echo "$i")
      name=worker$suffix
      alive "$name" && continue
      mkdir -p "$ROOT/work$suffix"
      start_daemon "$name" org.apache.spark.deploy.worker.Worker \
        --host 127.0.0.1 --port 0 --webui-port 0 --cores "${SPARK_WORKER_CORES:-2}" \
        --memory "${SPARK_WORKER_MEMORY:-2g}" --work-dir "$ROOT/work$suffix" "$URL"
    done
    for i in $(seq "$WORKERS"); do
      suffix=$([ "$i" = 1 ] || echo "$i")
      wait_for "$ROOT/worker$suffix.log" "Successfully registered with master"
    done
    echo "$URL"
    ;;
  stop)
    # every worker that has a pid file (however many were started), then the master
    for pidfile in "$ROOT"/worker*.pid "$ROOT/master.pid"; do
      [ -e "$pidfile" ] || continue
      name=$(basename "$pidfile" .pid)
      if alive "$name"; then
        pid=$(cat "$ROOT/$name.pid")
        kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
      fi
      rm -f "$ROOT/$name.pid"
    done
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
