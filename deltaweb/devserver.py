"""`make run`'s web server: Django's development server with TCP_NODELAY on its connections.

`python -m deltaweb.devserver 127.0.0.1:8000 --noreload --nostatic` is `manage.py runserver`
with one change. Django's server (wsgiref underneath) writes a response's headers and its body
in separate small sends on a kept-alive connection; with Nagle's algorithm on, the body's send
waits for the client's ACK of the headers, which the client delays (40 ms on Linux). A Delta
Sharing recipient's connector makes about ten requests per file (HEAD, then ranges), so each
file waited about half a second: 82 files took 57 s where gunicorn (the image's server, which
sends headers and body together) took 15 s. With the sends no longer held back, 82 files take
as long as under gunicorn (benchmarks/sharing_files.py; docs/operations.md).
"""

from __future__ import annotations

import os
import sys

from django.core.servers import basehttp


def main(argv: list[str]) -> None:
    # socketserver sets TCP_NODELAY on each accepted connection when this is True
    basehttp.WSGIRequestHandler.disable_nagle_algorithm = True
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deltaweb.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(["manage.py", "runserver", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
