"""The smallest useful plugin: greets every example.com Greeting by name, with
the punctuation its GreetingHelloExtension asks for.

The kind is in examples/hello/crd.yaml; run this plugin next to an operator for it
(docs/your-own-kind.md shows how to start one):

    KPLUG_SOCKET_DIR=/tmp/kplug-hello \\
        sidecar-sdk/python/.venv/bin/python sidecar-sdk/python/examples/hello.py
"""

import kplug


class Hello(kplug.Plugin):
    async def reconcile(self, request: kplug.Request) -> kplug.Response:
        salutation = request.spec.get("salutation", "hello")
        settings = request.extension("GreetingHelloExtension") or {}
        punctuation = settings.get("spec", {}).get("punctuation", "!")
        greeting = f"{salutation}, {request.name}{punctuation}"
        return (
            kplug.Response.ok(f"greeted {request.name}", status={"greeting": greeting})
            .condition("Greeted", True, "Greeted", greeting)
            .event("Greeted", greeting)
        )


if __name__ == "__main__":
    kplug.run(
        Hello(),
        kplug.PluginInfo(
            name="hello",
            version="0.1.0",
            description="greets Greeting objects",
            offers=[
                kplug.Offer(
                    base=kplug.GroupKind("example.com", "Greeting"),
                    implementation="Hello",
                    extensions=[kplug.GroupKind("example.com", "GreetingHelloExtension")],
                )
            ],
        ),
    )
