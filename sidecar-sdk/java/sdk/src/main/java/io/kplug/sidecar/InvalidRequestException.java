package io.kplug.sidecar;

/**
 * The operator sent an object that is not a JSON object. Its message is the one every SDK answers
 * with, e.g. "kplug: the base object is not valid JSON: ..." or "kplug: extension #1 is not a JSON
 * object": the handler is not called.
 */
public final class InvalidRequestException extends Exception {
  private static final long serialVersionUID = 1L;

  InvalidRequestException(String message) {
    super(message);
  }
}
