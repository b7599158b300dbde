"""OpcUaProvider: the built-in tag provider, an OPC UA client (asyncua).

A tag path is an OPC UA node id ("ns=2;s=Line1.Speed", "ns=2;i=1007") or a browse path
below the Objects folder ("2:Line1/2:Speed"). Values are written as the node's own data
type, so `write("ns=2;s=Speed", 40)` works on an Int32 node.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from cairn.steps.errors import TagError, TagUnavailable

if TYPE_CHECKING:
    from types import TracebackType

    from asyncua.client.client import Client
    from asyncua.common.node import Node

__all__ = ["OpcUaProvider", "server_url"]

# Status codes that say the request itself is wrong: retrying cannot help.
_REFUSALS = frozenset(
    {
        "BadAttributeIdInvalid",
        "BadBrowseNameInvalid",
        "BadNoMatch",
        "BadNodeIdInvalid",
        "BadNodeIdUnknown",
        "BadNotReadable",
        "BadNotWritable",
        "BadOutOfRange",
        "BadTypeMismatch",
        "BadUserAccessDenied",
        "BadWriteNotSupported",
    }
)


def server_url(url: str) -> str:
    """The `opc.tcp://` URL of a provider URL (`opcua://host:4840` or `opc.tcp://...`).

    Raises:
        TagError: Another scheme.
    """
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() in ("opcua", "opc.tcp"):
        return f"opc.tcp://{rest}"
    raise TagError(
        f"tag provider {url!r}: unknown scheme (use opcua://host:4840, or give Engine(tags=) "
        "a provider object)"
    )


class OpcUaProvider:
    """Tags on an OPC UA server: `read(path)` and `write(path, value)`.

    Connects on first use and keeps the connection until `close()`; `async with` closes
    it on the way out. The ready steps open one for each step when the provider is
    configured by URL.
    """

    def __init__(self, url: str, *, timeout: float = 4.0) -> None:
        """Configure (nothing connects yet).

        Args:
            url: `opcua://host:4840` or `opc.tcp://host:4840/path`.
            timeout: Seconds to wait for the server to answer a request (default 4).

        Raises:
            TagError: A URL of another scheme.
        """
        self.url = server_url(url)
        self.timeout = timeout
        self._client: Client | None = None
        self._types: dict[str, Any] = {}
        self._connecting = asyncio.Lock()

    async def __aenter__(self) -> OpcUaProvider:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the session now (reads and writes open it when needed).

        Raises:
            TagUnavailable: The server cannot be reached.
        """
        async with self._connecting:
            if self._client is not None:
                return
            from asyncua.client.client import Client

            client = Client(self.url, timeout=self.timeout)
            try:
                await client.connect()
            except (OSError, TimeoutError) as exc:
                raise TagUnavailable(
                    f"tag server {self.url}: cannot connect ({_said(exc)})"
                ) from exc
            except Exception as exc:  # the server answered, but refused the session
                raise TagUnavailable(f"tag server {self.url}: {_said(exc)}") from exc
            self._client = client

    async def close(self) -> None:
        """End the session; the next read or write opens a new one."""
        client, self._client = self._client, None
        if client is None:
            return
        try:
            await client.disconnect()
        except Exception:  # the connection is gone already: nothing is left to close
            pass

    async def read(self, path: str) -> Any:
        """The value of the tag at `path`.

        Raises:
            TagError: No such tag, or it cannot be read.
            TagUnavailable: The server cannot be reached.
        """
        node = await self._node(path)
        value = await self._ask(path, node.read_value())
        return _plain(value)

    async def write(self, path: str, value: Any) -> None:
        """Write `value` to the tag at `path`, as the tag's own data type.

        Raises:
            TagError: No such tag, it is read-only, or `value` does not fit its type.
            TagUnavailable: The server cannot be reached.
        """
        from asyncua import ua

        node = await self._node(path)
        kind = self._types.get(path)
        if kind is None:
            kind = self._types[path] = await self._ask(path, node.read_data_type_as_variant_type())
        try:
            variant = ua.Variant(value, kind)
            data = ua.DataValue(variant)
            await self._ask(path, node.write_value(data))
        except (TagError, TagUnavailable):
            raise
        except Exception as exc:  # the value cannot be encoded as the tag's type
            raise TagError(
                f"tag {path!r}: cannot write {value!r} as {kind.name} ({_said(exc)})", path=path
            ) from exc

    async def _node(self, path: str) -> Node:
        if not isinstance(path, str) or not path:
            raise TagError(f"a tag path must be a non-empty string, got {path!r}")
        await self.connect()
        client = self._client
        assert client is not None
        if "/" in path:
            parts = [part for part in path.strip("/").split("/") if part]
            found: Node = await self._ask(path, client.nodes.objects.get_child(parts))
            return found
        try:
            return client.get_node(path)
        except Exception as exc:
            raise TagError(
                f"tag {path!r}: not an OPC UA node id (write ns=2;s=Name or a browse path "
                f"2:Folder/2:Name) ({_said(exc)})",
                path=path,
            ) from exc

    async def _ask(self, path: str, request: Any) -> Any:
        """Await one request to the server; its failure as TagError or TagUnavailable."""
        from asyncua.ua.uaerrors import UaStatusCodeError

        try:
            return await request
        except UaStatusCodeError as exc:
            if type(exc).__name__ in _REFUSALS:
                raise TagError(f"tag {path!r}: {_said(exc)}", path=path) from exc
            await self.close()
            raise TagUnavailable(f"tag {path!r}: {_said(exc)}", path=path) from exc
        except (OSError, TimeoutError, ConnectionError) as exc:
            await self.close()
            raise TagUnavailable(
                f"tag {path!r}: the server at {self.url} did not answer ({_said(exc)})", path=path
            ) from exc


def _plain(value: Any) -> Any:
    """OPC UA's own value types as plain values the history can keep."""
    if isinstance(value, list):
        return [_plain(item) for item in value]
    text = getattr(value, "Text", None)  # LocalizedText
    if text is not None and type(value).__name__ == "LocalizedText":
        return text
    to_string = getattr(value, "to_string", None)  # NodeId, QualifiedName
    if callable(to_string) and type(value).__name__ in ("NodeId", "QualifiedName"):
        return to_string()
    return value


def _said(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
