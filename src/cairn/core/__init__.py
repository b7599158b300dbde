"""The replay engine: deterministic execution of one run against its journal."""
