"""Django's database sessions, each request's session read by one written-out query
(tables.services.access.hot_queries.session_row) instead of an ORM query compiled per request. Writing,
expiry and clearing are Django's own."""

from __future__ import annotations

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore

from tables.services.access.hot_queries import session_row


class SessionStore(DatabaseSessionStore):
    def _get_session_from_db(self):
        session = session_row(self.session_key)
        if session is None:
            self._session_key = None
        return session
