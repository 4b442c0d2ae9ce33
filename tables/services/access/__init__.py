"""Who is asking: roles, sign-in and its throttle, and the per-request lookups written in SQL."""
