"""What a Spark master URL says about where jobs run: in this process (`local[...]`) or on a
standalone cluster on this machine's loopback interface. Both the session and the
object-store route decide by it, so it lives apart from either."""

from __future__ import annotations

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def is_local(master: str) -> bool:
    """Whether `master` runs Spark inside this process (local, local[N], local-cluster[...])."""
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


def is_loopback_cluster(master: str) -> bool:
    """Whether `master` is a standalone cluster (`spark://`) on this machine's loopback."""
    host = master.split("://", 1)[-1].rsplit(":", 1)[0]
    return master.startswith("spark://") and host in LOOPBACK_HOSTS
