"""deltaweb's Django app, in layers. Each layer imports only the ones listed before it.

- ``delta/``     the Delta protocol core: pure Python over pyarrow, no Django, no Spark.
- ``spark/``     jobs on Spark: plain arguments in, plain results out; may import delta.
- ``services/``  use cases over the database: one module per job; may import delta and spark.
- ``web/``, ``api/``  pages and the REST API: parse the request, call a service, render; may
  import services (and delta for its types and errors), never each other.

At this level: ``models`` (the database), ``signals`` (what apps that plug in hear), ``tasks``
(Celery, by name), ``admin`` and ``urls``.
"""
