"""A registered table's history: the columns (declared once), the query, the export."""
