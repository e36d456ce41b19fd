"""Errors the SDK raises to plugin code (handler errors never leave the SDK)."""

from __future__ import annotations


class KplugError(Exception):
    """Base class of the errors raised by the kplug SDK."""


class StartupError(KplugError):
    """The plugin cannot start; the message names the plugin, the path and what to do.

    :func:`kplug.run` logs it and exits with status 1.
    """


class InvalidNameError(StartupError):
    """The plugin name is not a DNS label."""


class SocketInUseError(StartupError):
    """Another live process serves the plugin's socket; it is never taken over."""


class NotASocketError(StartupError):
    """Something that is not a socket sits where the plugin's socket must go."""


class InvalidRequestError(KplugError):
    """The operator sent an object that is not a JSON object.

    The SDK answers such a call with ``OUTCOME_FAILED`` and this message; the
    plugin's handler is not called.
    """
