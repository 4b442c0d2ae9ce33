"""The object-store backends, as a registry keyed by URL scheme (as delta-rs's log-store and
object-store factories are): everything that differs between S3, Azure and GCS is described
once, in a `Backend` of its own module (s3.py, azure.py, gcs.py), and the storage layer
(objectstore_config.py, objectstore.py) and the Spark routes (tables/spark/reading/objectstore_source.py,
hadoop_route.py) look it up by scheme or kind instead of testing for "s3", "az" or "gs".

Adding a backend is one module building its `Backend`, plus its line in `_builtin()` (or a
`register` call from anywhere, before its locations are opened).

Pure core: no Django, no pyspark. The Hadoop configuration a backend describes is plain data
(names to values) that tables/spark/reading/hadoop_route.py hands to Spark; obstore is imported only
when a store is built.
"""

from __future__ import annotations

from tables.delta.storage.backends.registry import (
    SCHEME_KINDS,
    Backend,
    HadoopAuthority,
    HadoopConf,
    StoreBuilder,
    all_backends,
    backend_for_scheme,
    backend_of,
    bucket_authority,
    named_schemes,
    no_hadoop_conf,
    register,
    spelled,
    unregister,
)

__all__ = [
    "SCHEME_KINDS",
    "Backend",
    "HadoopAuthority",
    "HadoopConf",
    "StoreBuilder",
    "all_backends",
    "backend_for_scheme",
    "backend_of",
    "bucket_authority",
    "named_schemes",
    "no_hadoop_conf",
    "register",
    "spelled",
    "unregister",
]


def _builtin() -> None:
    from tables.delta.storage.backends import azure, gcs, s3

    # this order is the order the accepted schemes are listed in messages
    for backend in (s3.BACKEND, gcs.BACKEND, azure.BACKEND):
        register(backend)


_builtin()
