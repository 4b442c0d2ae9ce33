"""The Delta Sharing protocol's HTTP side, under /delta-sharing/ (PROTOCOL.md): bearer tokens
only (no session, no CSRF), answers and errors in the protocol's shapes, the signed file URLs
of local tables served with range requests. Views parse and render; the use cases are in
tables.services.sharing."""
