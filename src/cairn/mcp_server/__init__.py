"""`cairn mcp`: the operator verbs as MCP tools for agents, over stdio or streamable HTTP.

Named `mcp_server` so that it never shadows the `mcp` SDK it is built on. The tools come
from the verb table (runtime/verbs.py) and the representation/ forms, like the CLI's
commands and the HTTP API's routes; HTTP is guarded by the dashboard's own checks.
"""
