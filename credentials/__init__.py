"""Per-location storage credentials: options an administrator stores for an object-store
location prefix, secrets encrypted at rest, looked up by the longest matching prefix whenever
the app opens a table's storage."""
