"""The sign-in backend: Django's ModelBackend, with the signed-in user of each request read by
one written-out query that also answers which roles it has (tables.services.access.hot_queries.user_row).

Every page asked the database for the session's user, then once per role check; the user and
its three role memberships now come together, and a page's role checks ask nothing more.
"""

from __future__ import annotations

from django.contrib.auth.backends import ModelBackend

from tables.services.access.hot_queries import user_row


class RoleModelBackend(ModelBackend):
    def get_user(self, user_id):
        user = user_row(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None
