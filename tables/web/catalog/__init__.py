"""Pages outside a table: the table list, registering, discovery of a prefix's tables."""
