"""Single sign-on against a real OpenID provider: a second Django process running
django-oidc-provider (tests/sso/provider/), driven in Chromium."""
