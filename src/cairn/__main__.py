"""`python -m cairn`: the same as the `cairn` command."""

from __future__ import annotations

from cairn.cli.main import main

if __name__ == "__main__":
    main()
