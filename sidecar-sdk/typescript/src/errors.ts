/**
 * Errors the SDK throws to plugin code. Errors thrown by a plugin's handlers
 * never leave the SDK: they become `OUTCOME_FAILED` responses.
 *
 * @module
 */

/** Base class of the errors thrown by the kplug SDK. */
export class KplugError extends Error {
  override name = "KplugError";
}

/**
 * The plugin cannot start; the message names the plugin, the path and what
 * to do. {@link run} logs it and exits with status 1.
 */
export class StartupError extends KplugError {
  override name = "StartupError";
}

/** The plugin name is not a DNS label. */
export class InvalidNameError extends StartupError {
  override name = "InvalidNameError";
}

/** Another live process serves the plugin's socket; it is never taken over. */
export class SocketInUseError extends StartupError {
  override name = "SocketInUseError";
}

/** Something that is not a socket sits where the plugin's socket must go; it is never deleted. */
export class NotASocketError extends StartupError {
  override name = "NotASocketError";
}

/**
 * The operator sent an object that is not a JSON object. The SDK answers
 * such a call with `OUTCOME_FAILED` and this message; the handler is not called.
 */
export class InvalidRequestError extends KplugError {
  override name = "InvalidRequestError";
}

/**
 * A response the operator would refuse: a reserved status key or condition
 * type, a status that is not a JSON object, a status or event for an object
 * the plugin was not sent. Thrown by the {@link Response} builders; when it
 * escapes a handler, the call is answered `OUTCOME_FAILED` with its message.
 */
export class InvalidResponseError extends KplugError {
  override name = "InvalidResponseError";
}
