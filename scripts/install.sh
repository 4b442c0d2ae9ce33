#!/usr/bin/env bash
# The virtualenv and the project's pinned packages (Makefile: `make install`, `make install-test`).
#   scripts/install.sh VENV          the packages `make run` needs (pyproject.toml's dependencies)
#   scripts/install.sh VENV test     and the test suite's (its [test] extra, and delta-sharing)
# One line per step with its time, pip's own progress (a line per package it collects, each
# wheel it builds) and, while pip installs without a word (pyspark alone unpacks 300 MB), a line
# every 5 s with the packages in place so far. pip's own cache (~/.cache/pip) makes a second
# install quick.
set -uo pipefail
VENV=${1:?usage: scripts/install.sh VENV [test]}
EXTRA=${2:-}
PY=$VENV/bin/python
PIP=(env PYTHONWARNINGS=ignore "$VENV/bin/pip")
# no byte-compiling at install: pip compiled every module of every package (pyspark's, pandas's,
# botocore's, ...) one after the other; Python compiles the ones a process imports, once, on
# first use.
start=$(date +%s)
say() { echo "[$1] $2 ($(($(date +%s) - start)) s)"; }

# pip's lines worth seeing: what it collects and builds, what it installs (cut short), errors
progress() {
  while IFS= read -r line; do
    case "$line" in
      Collecting* | Building* | Created\ wheel* | ERROR* | error:*) echo "  $line" ;;
      Installing\ collected\ packages:*) echo "  installing $(echo "$line" | tr ',' '\n' | wc -l) packages" ;;
      Successfully\ installed*) echo "  installed $(($(echo "$line" | wc -w) - 2)) packages" ;;
    esac
  done
}

# while pip runs: a line every 5 s with the packages in place so far
ticker() {
  local site count
  while sleep 5; do
    site=$(ls -d "$VENV"/lib/python3*/site-packages 2>/dev/null | head -1)
    count=$(ls -d "$site"/*.dist-info 2>/dev/null | wc -l)
    echo "  ... $(($(date +%s) - start)) s: $count packages in $VENV so far"
  done
}

with_ticker() {
  ticker &
  local tick=$! rc
  "$@" 2>&1 | progress
  rc=${PIPESTATUS[0]}
  kill "$tick" 2>/dev/null
  wait "$tick" 2>/dev/null
  return "$rc"
}

if [ "$EXTRA" != "test" ]; then
  say 1/4 "virtualenv $VENV"
  test -x "$PY" || python3.11 -m venv "$VENV" || python3 -m venv "$VENV" || exit 1
  # the project's build needs setuptools 68 or later (pyproject.toml); the virtualenv's own pip
  # serves as it is
  say 2/4 "setuptools"
  "${PIP[@]}" install -q --no-compile --upgrade 'setuptools>=68' 2>&1 | grep -v -i 'warning\|deprecat'
  say 3/4 "the project and its pinned packages (pyproject.toml; about a minute with pip's cache)"
  # --no-build-isolation: the project is built with the setuptools just installed, instead of
  # pip fetching another copy into a throwaway environment first
  with_ticker "${PIP[@]}" install --progress-bar off --no-compile --no-build-isolation -e . || exit 1
  say 4/4 "check"
  "$PY" -c "import django, pyarrow, pyspark, prometheus_client, mozilla_django_oidc" || exit 1
  "$PY" -c "import grpc, grpc_status, google.rpc, zstandard, pyspark.sql.connect.session" || exit 1
else
  say 1/2 "the test suite's packages (pyproject.toml's [test] extra)"
  with_ticker "${PIP[@]}" install --progress-bar off --no-compile --no-build-isolation -e '.[test]' || exit 1
  # delta-sharing 1.4.2 pins pyarrow<=23.0.1, which the project's pyarrow cannot meet
  "${PIP[@]}" install -q --progress-bar off --no-deps delta-sharing==1.4.2 2>&1 | grep -v -i 'warning\|deprecat'
  say 2/2 "check"
  "$PY" -c "import deltalake, pytest, playwright, delta_sharing" || exit 1
fi
echo "installed in $(($(date +%s) - start)) s"
