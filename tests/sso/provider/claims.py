"""The provider's claims: the standard ones from the user, and its Django groups as `groups`."""

from oidc_provider.lib.claims import ScopeClaims


def userinfo(claims, user):
    claims["preferred_username"] = user.username
    claims["email"] = user.email
    claims["email_verified"] = True
    return claims


class GroupsClaims(ScopeClaims):
    info_groups = ("Groups", "the groups you belong to")

    def scope_groups(self):
        return {"groups": sorted(self.user.groups.values_list("name", flat=True))}
