#!/usr/bin/env bash
# Build the deltaweb image with podman: scripts/image.sh [TAG [DOCKERFILE]] -> prints TAG
# (DOCKERFILE, relative to the repository, defaults to its Dockerfile; deploy/stand-ins.Dockerfile
# builds the compose stack's stand-ins the same way).
# The base is python:3.11-slim-bookworm when it can be pulled; where it cannot (no docker.io),
# an equivalent made from Debian's packages with mmdebstrap (bookworm, python3.11 and pip),
# built once per machine and reused, as podman reuses the image's own layers between runs.
# pip in the build reaches the package registry with the machine's CA bundle, mounted for the
# build only (never copied into the image). The containers' nofile and nproc limits are set at
# or below the machine's (podman refuses limits above them).
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${1:-deltaweb:test}
DOCKERFILE=${2:-Dockerfile}
nofile=$(ulimit -Hn); nproc=$(ulimit -Hu)
[ "$nofile" = unlimited ] || [ "$nofile" -gt 4096 ] && nofile=4096
[ "$nproc" = unlimited ] || [ "$nproc" -gt 4096 ] && nproc=4096
LIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
BASE=${DELTAWEB_BASE_IMAGE:-}
if [ -z "$BASE" ]; then
  if podman image exists localhost/deltaweb-base:bookworm; then
    BASE=localhost/deltaweb-base:bookworm
  elif timeout 60 podman pull -q docker.io/library/python:3.11-slim-bookworm >/dev/null 2>&1; then
    BASE=docker.io/library/python:3.11-slim-bookworm
  else
    echo "python:3.11-slim-bookworm cannot be pulled: building an equivalent from Debian's packages" >&2
    mmdebstrap --quiet --variant=apt --include=python3.11,python3-pip,python3-venv,ca-certificates bookworm - |
      podman import -q - localhost/deltaweb-base-raw:bookworm >/dev/null
    # `python` and `pip` as the python image names them; pip may install into the system's Python
    printf '%s\n' 'FROM localhost/deltaweb-base-raw:bookworm' \
      'RUN ln -s /usr/bin/python3.11 /usr/local/bin/python && ln -s /usr/bin/pip3 /usr/local/bin/pip && rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED' \
      'ENV LANG=C.UTF-8' 'CMD ["python"]' |
      podman build -q "${LIMITS[@]}" -t localhost/deltaweb-base:bookworm -f - . >/dev/null
    BASE=localhost/deltaweb-base:bookworm
  fi
fi
ca=/etc/ssl/certs/ca-certificates.crt
mount=()
[ -r "$ca" ] && mount=(--volume "$ca:$ca:ro")
podman build "${LIMITS[@]}" "${mount[@]}" --build-arg BASE_IMAGE="$BASE" -f "$DOCKERFILE" -t "$TAG" . >&2
echo "$TAG"
