"""A pretend PLC for ``examples/steps_tags.py``: ``python examples/plc_simulator.py [PORT]``.

An OPC UA server (asyncua) on 127.0.0.1 with ``ns=2;s=Line1.Speed`` (Int32) and
``ns=2;s=Line1.Running`` (Boolean); the line runs while its speed is above zero.
"""

from __future__ import annotations

import asyncio
import sys

from asyncua import Server, ua


async def main(port: int) -> None:
    server = Server()
    await server.init()
    server.set_endpoint(f"opc.tcp://127.0.0.1:{port}/")
    namespace = await server.register_namespace("urn:cairn:plc-simulator")
    line = await server.nodes.objects.add_object(namespace, "Line1")
    speed = await line.add_variable(
        ua.NodeId("Line1.Speed", namespace), "Speed", 0, varianttype=ua.VariantType.Int32
    )
    running = await line.add_variable(
        ua.NodeId("Line1.Running", namespace), "Running", False, varianttype=ua.VariantType.Boolean
    )
    await speed.set_writable()
    async with server:
        print(f"PLC simulator on opcua://127.0.0.1:{port}", flush=True)
        while True:
            await running.write_value(await speed.read_value() > 0, ua.VariantType.Boolean)
            await asyncio.sleep(0.2)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 4840))
