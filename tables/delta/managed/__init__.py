"""Managed tables: commits through a commit owner (the interface, its REST client) and
catalog-managed tables as a client writes them."""
