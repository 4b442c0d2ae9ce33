"""Writing, above reading: a commit put-if-absent (`commit`), commits through a table's owner
(`managed`) and catalog-managed tables as their client writes them (`catalog`). It reads the
table's state first (snapshot, its owner, its timestamps); nothing below imports it."""
