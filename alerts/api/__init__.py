"""Alerts' REST API: views, routes (mounted before the tables API's catch-all) and serializers."""
