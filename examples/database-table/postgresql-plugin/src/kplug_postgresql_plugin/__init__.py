"""kplug plugin that reconciles myorg.org DatabaseTable objects into PostgreSQL tables.

Run it with ``python -m kplug_postgresql_plugin`` (or the ``kplug-postgresql-plugin``
script); see README.md for its configuration and semantics.
"""

from kplug_postgresql_plugin.plugin import INFO, PostgreSQLPlugin

__all__ = ["INFO", "PostgreSQLPlugin"]
