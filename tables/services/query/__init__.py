"""SQL at any version: a user's read-only statement checked and rewritten (statement), its table
references resolved to versions and started as a data job (run), and the same query at two
versions compared (compare)."""
