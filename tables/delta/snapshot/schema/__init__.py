"""A version's schema: column mapping (logical and physical names), its CREATE TABLE, two schemas
compared."""
