"""The Unity Catalog Delta API at ``/api/2.1/unity-catalog/``: routes, views in UC's error
model, and the OpenAPI description it serves."""
