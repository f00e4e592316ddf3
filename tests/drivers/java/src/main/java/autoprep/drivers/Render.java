package autoprep.drivers;

import com.datastax.oss.driver.api.core.cql.ColumnDefinition;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.data.ByteUtils;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Renders driver values as text that shows every difference: types, order, exact numbers, bytes.
 * Rows read through autoprep and directly, and the rows the workload expects, are compared in this
 * form.
 */
final class Render {
  private Render() {}

  /** One value as the driver decoded it (String, Integer, Long, Double, UUID, Instant, List, ...). */
  static String value(Object v) {
    if (v == null) {
      return "null";
    }
    if (v instanceof String s) {
      return "'" + s + "'";
    }
    if (v instanceof ByteBuffer b) {
      return ByteUtils.toHexString(b.duplicate());
    }
    if (v instanceof List<?> l) {
      List<String> parts = new ArrayList<>();
      for (Object e : l) {
        parts.add(value(e));
      }
      return "[" + String.join(", ", parts) + "]";
    }
    if (v instanceof Map<?, ?> m) {
      List<String> parts = new ArrayList<>();
      for (Map.Entry<?, ?> e : m.entrySet()) {
        parts.add(value(e.getKey()) + ": " + value(e.getValue()));
      }
      return "{" + String.join(", ", parts) + "}";
    }
    return v.getClass().getSimpleName() + ":" + v;
  }

  /** A row: every column's value, in the result's column order. */
  static String row(Row row) {
    List<String> parts = new ArrayList<>();
    for (int i = 0; i < row.getColumnDefinitions().size(); i++) {
      parts.add(value(row.getObject(i)));
    }
    return String.join(" | ", parts);
  }

  /** Expected values in the same form as {@link #row(Row)}. */
  static String values(Object... vs) {
    List<String> parts = new ArrayList<>();
    for (Object v : vs) {
      parts.add(value(v));
    }
    return String.join(" | ", parts);
  }

  /** A result's column names and CQL types (keyspace and table left out, so that the control's
   * keyspace compares equal). */
  static String columns(Iterable<ColumnDefinition> defs) {
    List<String> parts = new ArrayList<>();
    for (ColumnDefinition d : defs) {
      parts.add(d.getName().asCql(true) + " " + d.getType().asCql(false, true));
    }
    return String.join(", ", parts);
  }
}
