"""The PostgreSQL backend: its store, connections, group commit, SQL dialect and stall watch."""
