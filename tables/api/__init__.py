"""The REST API (DRF): serializers, views, permissions, urls; OpenAPI schema at /api/schema/."""
