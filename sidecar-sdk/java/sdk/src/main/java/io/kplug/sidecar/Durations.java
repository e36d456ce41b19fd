package io.kplug.sidecar;

import java.time.Duration;

/** Conversions between {@link Duration} and protobuf's Duration. */
final class Durations {
  private Durations() {}

  static com.google.protobuf.Duration toProto(Duration d) {
    return com.google.protobuf.Duration.newBuilder()
        .setSeconds(d.getSeconds())
        .setNanos(d.getNano())
        .build();
  }

  static Duration fromProto(com.google.protobuf.Duration d) {
    return Duration.ofSeconds(d.getSeconds(), d.getNanos());
  }
}
