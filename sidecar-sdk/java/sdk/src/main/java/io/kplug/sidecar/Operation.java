package io.kplug.sidecar;

/** The admission operation an object is checked for. */
public enum Operation {
  /** The object is being created; there is no old object. */
  CREATE,
  /** The object is being changed; the old object is sent too. */
  UPDATE
}
