"""The SQLite backend: its store, connections, step transactions and WAL checkpoints."""
