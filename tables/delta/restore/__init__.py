"""RESTORE: planning (whole table or a predicate's partitions), the actions it writes, the
protocol rules, and committing the plan."""
