"""The Python SDK's side of the polyglot benchmark (sidecar-sdk/benches/polyglot.rs,
`make bench`): a plugin served by ``kplug.run``, the SDK's normal path, on
$KPLUG_SOCKET_DIR/plugins/echo/plugin.sock. It decodes the object and echoes its
spec into the status, as the other SDKs' bench plugins do. Nothing registers it
(the benchmark runs no operator): its heartbeats fail and back off in the
background, up to one attempt per heartbeat interval.

    KPLUG_SOCKET_DIR=/tmp/b .venv/bin/python bench/sdk_echo.py
"""

import kplug


class Echo(kplug.Plugin):
    async def reconcile(self, request: kplug.Request) -> kplug.Response:
        return kplug.Response.ok(status={"echo": request.spec})


if __name__ == "__main__":
    kplug.run(
        Echo(),
        kplug.PluginInfo(
            name="echo",
            version="1.0.0",
            offers=[
                kplug.Offer(
                    base=kplug.GroupKind("myorg.org", "DatabaseTable"), implementation="Echo"
                )
            ],
        ),
    )
