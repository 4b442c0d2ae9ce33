"""The storage boundary: the only code that touches a table's bytes (local disk or object stores),
and the check that every path a log names lies under the allowed roots."""
