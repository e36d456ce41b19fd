package io.kplug.sidecar;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/** The protocol's bounds on texts an answer carries. */
final class Text {
  private Text() {}

  /**
   * {@code text} cut to {@code limit} characters (code points, as every SDK counts them), the last
   * one an ellipsis when cut.
   */
  static String cut(String text, int limit) {
    text = Objects.requireNonNullElse(text, "");
    if (text.codePointCount(0, text.length()) <= limit) {
      return text;
    }
    return text.substring(0, text.offsetByCodePoints(0, limit - 1)) + "…";
  }

  /** At most 16 warnings (the last one saying how many more there were), each cut to 256. */
  static List<String> boundedWarnings(List<String> warnings) {
    List<String> kept = warnings;
    if (kept.size() > Protocol.MAX_WARNINGS) {
      int more = kept.size() - (Protocol.MAX_WARNINGS - 1);
      kept = new ArrayList<>(kept.subList(0, Protocol.MAX_WARNINGS - 1));
      kept.add("and " + more + " more warnings");
    }
    return kept.stream().map(w -> cut(w, Protocol.MAX_WARNING_CHARS)).toList();
  }
}
