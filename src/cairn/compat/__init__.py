"""Other systems' spellings over cairn's own API, one module per system.

`cairn.compat.ignition` stands in for Ignition's `exchange.workflows` imports. Each module
only maps names onto cairn's primitives: the runs, history and replay are cairn's.
"""
