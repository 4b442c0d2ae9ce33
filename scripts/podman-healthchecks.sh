#!/usr/bin/env bash
# Run every running container's healthcheck every few seconds, as systemd's timers do for podman
# where systemd runs. Debian's podman 4.3 without systemd (a container, a minimal host) never
# runs healthchecks: every service stays "(starting)", and docker-compose, waiting on
# `condition: service_healthy`, never starts the services that depend on them. With this running
# beside `podman system service`, docker-compose.yml starts as written (docs/operations.md).
#   scripts/podman-healthchecks.sh [SECONDS]     (default 5; Ctrl-C stops it)
# PODMAN_HEALTHCHECK_FILTER (e.g. name=deltaweb) limits it to some containers.
set -uo pipefail
EVERY=${1:-5}
FILTER=${PODMAN_HEALTHCHECK_FILTER:-}
while true; do
  for name in $(podman ps --format '{{.Names}}' ${FILTER:+--filter "$FILTER"}); do
    # only containers that have a healthcheck: podman exits 125 for the others, said nowhere
    if [ "$(podman inspect -f '{{if .Config.Healthcheck}}yes{{end}}' "$name" 2>/dev/null)" = yes ]; then
      podman healthcheck run "$name" >/dev/null 2>&1 || true
    fi
  done
  sleep "$EVERY"
done
