"""Use cases: what a page, an API endpoint, the admin or a task asks for, done once.

May import the core (``tables.delta``), Spark jobs (``tables.spark``, lazily: a page never
starts Spark), the models and ``tables.signals``; never ``web`` or ``api``. Errors leave as
``errors.ServiceError`` (a code and its HTTP status), which both front ends render.
"""
