"""A small OpenID provider for the tests: django-oidc-provider in its own Django project."""
