"""The REST API (DRF), one module per concept, each holding its serializers and its views:
tables (and TableViewSet, composed of the concepts' table actions), jobs, restores, pins,
history/, versions/, data/, discovery, owner, auth; base/ is what they are built on; catalog/ and
sharing/ are the Unity Catalog and Delta Sharing protocols. OpenAPI schema at /api/schema/."""
