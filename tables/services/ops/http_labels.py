"""The request's method as a label (metrics) or a log field: a closed set, since a client chooses
the method it sends, and one series or value per made-up method would grow without bound. No
Django import: the log formatter uses it before the apps are loaded."""

from __future__ import annotations

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"})


def method_label(method: str | None) -> str:
    """A standard method as sent, anything else `other`."""
    return method if method in METHODS else "other"
