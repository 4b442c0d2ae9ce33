"""deltaweb as a commit owner: the database owner, how the app reaches it, its use cases, and the
Unity Catalog API's catalog behind it."""
