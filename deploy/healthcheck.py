#!/usr/bin/env python3
"""The containers' healthchecks, one word per argument: `deltaweb-healthcheck KIND ...`.

The image installs this file as /usr/local/bin/deltaweb-healthcheck (Dockerfile). It is a
script of its own, not a module of the deltaweb package: importing that package starts Celery
and took longer than a check's 5 s timeout on a loaded machine.

A compose file's `test: ["CMD", "python", "-c", "import socket; ..."]` is not run as written
everywhere: podman 4.3 (its own `--health-cmd` and its Docker API, which docker-compose talks
to) joins the words with spaces and splits them again, so `python -c` got `import` alone and
every such check failed. Here each check is a command whose arguments are single words, the
same under any runtime. Exit status 0 is healthy, 1 is not (with one line saying why).

  http URL                   the URL answers 2xx within 4 s
  tcp HOST:PORT [HOST:PORT]  each address accepts a connection within 4 s
  fresh PATH SECONDS         the file was touched within SECONDS (the beat's heartbeat)
  worker                     this container's Celery worker answers a ping through the broker
  events                     with DELTAWEB_SQS_QUEUE_URL set, a poll succeeded within 180 s

Only the standard library is imported for the first three (a check every 10-30 s stays cheap,
about 0.1 s).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

TIMEOUT = 4.0


def http(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as answer:
            return None if 200 <= answer.status < 300 else f"{url}: {answer.status}"
    except Exception as failed:  # any failure is "not healthy", said in one line
        return f"{url}: {failed}"


def tcp(*addresses: str) -> str | None:
    for address in addresses:
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), TIMEOUT).close()
        except (OSError, ValueError) as failed:
            return f"{address}: {failed}"
    return None


def fresh(path: str, seconds: str) -> str | None:
    try:
        age = time.time() - os.path.getmtime(path)
    except OSError as failed:
        return f"{path}: {failed}"
    return None if age <= float(seconds) else f"{path}: last touched {age:.0f} s ago"


def worker() -> str | None:
    # the worker's default node name is celery@<hostname>; a ping of that node alone
    node = f"celery@{socket.gethostname()}"
    command = [sys.executable, "-m", "celery", "-A", "deltaweb", "inspect", "ping", "-d", node, "--timeout", "5"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    return None if done.returncode == 0 else f"{node}: {(done.stdout + done.stderr).strip()[-300:]}"


def events() -> str | None:
    if not os.environ.get("DELTAWEB_SQS_QUEUE_URL"):
        return None  # no queue, no push: the service only sleeps
    import django

    sys.path.insert(0, os.getcwd())  # the image's /app (its WORKDIR), where the project lives
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deltaweb.settings")
    django.setup()
    from tables.services.sync import events as listener

    age = time.time() - listener.counts().get("last_poll", 0)
    return None if age <= 180 else f"the last successful poll was {age:.0f} s ago"


CHECKS = {"http": http, "tcp": tcp, "fresh": fresh, "worker": worker, "events": events}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in CHECKS:
        print(f"usage: deltaweb-healthcheck {{{'|'.join(CHECKS)}}} ARGS...", file=sys.stderr)
        return 2
    try:
        problem = CHECKS[argv[0]](*argv[1:])
    except TypeError:
        print(f"{argv[0]}: wrong arguments {argv[1:]}", file=sys.stderr)
        return 2
    if problem:
        print(problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
