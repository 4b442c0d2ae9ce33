"""`make run`'s preparation in one process (scripts/run.sh): the system checks once, the database
migrated, the static files collected, the roles and demo users, the demo table.

Each of these was a `manage.py` command of its own, and each started Django and ran every
system check again: about 10 s apiece on the loaded 2-core machine, a minute before the first
page. Here Django starts once and the checks run once (the web server then skips them).
Prints scripts/run.sh's step lines; exits 1 when the checks or a migration fail.
"""

from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deltaweb.settings")

START = time.monotonic()


def step(text: str) -> None:
    print(f"{text} ({time.monotonic() - START:.0f} s)", flush=True)


def main() -> int:
    import django
    from django.core.management import call_command
    from django.core.management.base import CommandError, SystemCheckError

    django.setup()
    step("[run 2/7] the database (var/deltaweb.sqlite3)")
    try:
        call_command("check", stdout=io.StringIO())
        call_command("migrate", interactive=False, verbosity=0)
    except (SystemCheckError, CommandError) as failed:
        print(failed, file=sys.stderr)
        return 1
    step("[run 3/7] static files, hashed and compressed (plotly.js 4.8 MB goes out gzipped)")
    call_command("collectstatic", interactive=False, verbosity=0)
    step("[run 4/7] roles and demo users")
    roles = io.StringIO()
    call_command("create_roles", demo_users=True, stdout=roles)
    print("\n".join(line for line in roles.getvalue().splitlines() if not line.startswith("group")), flush=True)
    step("[run 5/7] the demo table")
    try:
        call_command("bootstrap_demo")
    except SystemExit:  # it said why on stderr
        print("the demo table was not created (see the message above)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
