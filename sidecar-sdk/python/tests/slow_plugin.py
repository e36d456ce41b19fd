"""A plugin run as a separate process by test_shutdown.py: it sleeps as long as told."""

import time

import kplug


class Slow(kplug.Plugin):
    def reconcile(self, request: kplug.Request) -> kplug.Response:
        # A blocking handler, as with a synchronous database driver.
        time.sleep(float(request.spec.get("sleepSeconds", 0)))
        return kplug.Response.ok("slept")


if __name__ == "__main__":
    kplug.run(
        Slow(),
        kplug.PluginInfo(
            name="slow",
            version="1.0.0",
            offers=[kplug.Offer(kplug.GroupKind("test.kplug.dev", "Nap"), "Slow")],
        ),
    )
