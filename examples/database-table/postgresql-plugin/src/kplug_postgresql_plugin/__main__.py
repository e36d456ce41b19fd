"""``python -m kplug_postgresql_plugin``: serve the plugin until SIGTERM."""

from __future__ import annotations

import logging

import kplug

from kplug_postgresql_plugin.config import ConfigError, load_servers
from kplug_postgresql_plugin.plugin import INFO, PostgreSQLPlugin

logger = logging.getLogger("kplug_postgresql_plugin")


def main() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # The configuration is read again on every call (a mounted Secret may
    # change); checking it here only makes a mistake visible at start-up.
    try:
        servers = load_servers()
    except ConfigError as e:
        logger.error("%s; every DatabaseTable will fail until it is fixed", e)
    else:
        if servers.dsns:
            logger.info("servers configured: %s", ", ".join(sorted(servers.dsns)))
        else:
            logger.warning("no PostgreSQL servers configured (looked in %s)", servers.where())
    kplug.run(PostgreSQLPlugin(), INFO)


if __name__ == "__main__":
    main()
