"""A kplug plugin that greets: it reconciles example.org/Greeting objects.

Run it next to an operator sharing the socket dir:

    KPLUG_SOCKET_DIR=/tmp/kplug python examples/hello.py
"""

import kplug


class Hello(kplug.Plugin):
    async def reconcile(self, request: kplug.Request) -> kplug.Response:
        who = request.spec.get("name", request.name)
        return (
            kplug.Response.ok(f"greeted {who}", status={"greeting": f"Hello, {who}!"})
            .condition("Greeted", True, "Greeted", f"said hello to {who}")
            .event("Greeted", f"said hello to {who}")
        )


if __name__ == "__main__":
    kplug.run(
        Hello(),
        kplug.PluginInfo(
            name="hello",
            version="0.1.0",
            description="Says hello",
            offers=[
                kplug.Offer(base=kplug.GroupKind("example.org", "Greeting"), implementation="Hello")
            ],
        ),
    )
