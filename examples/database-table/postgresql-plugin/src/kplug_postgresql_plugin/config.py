"""Which PostgreSQL server a DatabaseTable's ``spec.serverName`` means.

The plugin gets no Kubernetes credentials, so it cannot read Secrets: the
mapping from server names to connection strings is its own configuration,
typically a Secret mounted as a file in the plugin's container:

- ``KPLUG_POSTGRES_SERVERS_FILE``: path to a JSON object ``{"<serverName>": "<DSN>"}``;
- ``KPLUG_POSTGRES_SERVERS``: the same JSON object inline.

Both may be set; an entry in ``KPLUG_POSTGRES_SERVERS`` wins over the file's.
They are read on every call, so an updated mounted Secret is picked up
without a restart.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

SERVERS_FILE_ENV = "KPLUG_POSTGRES_SERVERS_FILE"
SERVERS_ENV = "KPLUG_POSTGRES_SERVERS"


class ConfigError(Exception):
    """The plugin's server configuration is malformed or unreadable."""


class UnknownServerError(ConfigError):
    """``spec.serverName`` names a server the configuration does not have."""


@dataclass(frozen=True)
class Servers:
    """The configured servers, and where they were read from (for messages)."""

    dsns: Mapping[str, str]
    sources: tuple[str, ...]

    def where(self) -> str:
        """Where the plugin looked, for a message naming it."""
        return " and ".join(self.sources)

    def dsn(self, server_name: str) -> str:
        """The DSN of ``server_name``; ConfigError naming the server and the sources if
        it is not configured."""
        try:
            return self.dsns[server_name]
        except KeyError:
            known = ", ".join(sorted(self.dsns)) or "none"
            raise UnknownServerError(
                f'server "{server_name}" is not configured for the PostgreSQL plugin: it looked '
                f"in {self.where()} and found {known}. Add "
                f'"{server_name}": "postgresql://user:password@host:port/dbname" to one of them, '
                "or set spec.serverName to a configured server"
            ) from None


def load_servers(environ: Mapping[str, str] | None = None) -> Servers:
    """Read the server map from the environment (and the file it names)."""
    env = os.environ if environ is None else environ
    dsns: dict[str, str] = {}
    sources: list[str] = []
    if path := env.get(SERVERS_FILE_ENV):
        source = f"{SERVERS_FILE_ENV}={path}"
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ConfigError(f"cannot read {source}: {e.strerror}") from e
        dsns.update(_parse(text, source))
        sources.append(source)
    else:
        sources.append(f"{SERVERS_FILE_ENV} (not set)")
    if (inline := env.get(SERVERS_ENV)) is not None:
        dsns.update(_parse(inline, SERVERS_ENV))
        sources.append(SERVERS_ENV)
    else:
        sources.append(f"{SERVERS_ENV} (not set)")
    return Servers(dsns, tuple(sources))


def _parse(text: str, source: str) -> dict[str, str]:
    example = '{"main": "postgresql://user:password@host:5432/dbname"}'
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"{source} is not valid JSON ({e}); expected e.g. {example}") from e
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in value.items()
    ):
        raise ConfigError(
            f"{source} must be a JSON object mapping server names to connection strings, "
            f"e.g. {example}"
        )
    return value
