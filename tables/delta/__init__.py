"""The Delta protocol core: log listing, replay, snapshots, timestamps, commits.

Pure Python over pyarrow and orjson: it imports neither Django nor Spark, so it is usable
and testable on its own.
"""
