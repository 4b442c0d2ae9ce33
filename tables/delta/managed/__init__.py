"""Managed tables: commits through a commit owner (the interface and its REST client); writing
through it is tables.delta.write."""
