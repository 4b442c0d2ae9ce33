"""Server-rendered pages: views by tab, forms, presentation helpers, charts, static files.

Views parse the request, call ``tables.services`` and render; they import neither ``api`` nor Spark.
"""
