"""Syncing a table: replaying its log into the cached history, incrementally, in batches."""
