"""Template tags of the alerts app for the site's pages: the unread in-app notification count
the navigation bar shows beside "Activity" (one COUNT query, only for signed-in users)."""

from __future__ import annotations

from django import template

from alerts import services

register = template.Library()


@register.simple_tag
def unread_notifications(user) -> int:
    """How many of `user`'s in-app notifications are unread (0 when signed out)."""
    if user is None or not user.is_authenticated:
        return 0
    return services.unread_count(user)


@register.filter
def can_edit_rules(user) -> bool:
    """Whether `user` changes alert rules (the navigation and the settings page link the rules)."""
    return services.can_edit_rules(user)
