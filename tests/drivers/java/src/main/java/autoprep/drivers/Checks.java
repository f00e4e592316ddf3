package autoprep.drivers;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/** Collects the outcome of every check, so that one run reports all mismatches at once. */
final class Checks {
  private int passed;
  private final List<String> failures = new ArrayList<>();

  /** Records a check that `actual` equals `expected` (compared with {@link Objects#equals}). */
  void equal(String what, Object expected, Object actual) {
    if (Objects.equals(expected, actual)) {
      passed++;
    } else {
      fail(what + ": expected <" + expected + "> but got <" + actual + ">");
    }
  }

  /** Records a check that `ok` holds; `detail` says what was seen when it does not. */
  void that(String what, boolean ok, String detail) {
    if (ok) {
      passed++;
    } else {
      fail(what + ": " + detail);
    }
  }

  /** Records a failed check. */
  void fail(String message) {
    failures.add(message);
    System.out.println("MISMATCH " + message);
  }

  int passed() {
    return passed;
  }

  List<String> failures() {
    return failures;
  }
}
