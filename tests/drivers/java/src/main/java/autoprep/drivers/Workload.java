package autoprep.drivers;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DefaultProtocolVersion;
import com.datastax.oss.driver.api.core.cql.AsyncResultSet;
import com.datastax.oss.driver.api.core.cql.BatchStatement;
import com.datastax.oss.driver.api.core.cql.BatchType;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import com.datastax.oss.driver.api.core.cql.Statement;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutionException;

/**
 * The legacy workload: schema, unprepared statements with literals of many types, paging,
 * prepared statements, batches (text and the driver's API), a schema change. Every answer is
 * checked against what the workload wrote, and recorded as an observation, so that the run
 * through autoprep can also be compared line by line with the control run against the node.
 */
final class Workload {
  /** Rows of the paged partition. */
  static final int ROWS = 100;
  /** The page size of the paged reads. */
  static final int PAGE = 10;
  /** How often a repeated statement is sent: enough for autoprep to prepare its shape (it does
   * so in the background on the Nth sighting) and then rewrite it. */
  static final int REPEAT = 4;

  private static final String COLUMNS = "ck, name, n, big, d, id, at, tags, attrs, data";
  private static final DateTimeFormatter TS =
      DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss.SSSxx").withZone(ZoneOffset.UTC);

  private final CqlSession session;
  private final String ks;
  private final Checks checks;
  private final String label;
  private final List<String> observations = new ArrayList<>();

  Workload(CqlSession session, String ks, Checks checks, String label) {
    this.session = session;
    this.ks = ks;
    this.checks = checks;
    this.label = label;
  }

  /** Runs the whole workload; returns what it observed, in order. */
  List<String> run() throws Exception {
    step("schema", this::schema);
    step("unprepared writes", this::unpreparedInserts);
    step("unprepared reads", this::unpreparedReads);
    step("prepared", this::prepared);
    step("batches", this::batches);
    step("schema change", this::schemaChange);
    return observations;
  }

  // ---- the data ---------------------------------------------------------------------------

  /** The values of row `i` (0..ROWS-1) of partition 1, in {@link #COLUMNS} order. */
  static Object[] row(int i) {
    String name = "name-" + i + (i % 7 == 0 ? " it's" : "");
    int n = i * 3 - 150;
    long big = 5_000_000_000L * (i - 50) + i;
    double d = (i - 50) / 8.0;
    UUID id = UUID.fromString(String.format("00000000-0000-4000-8000-%012x", i * 7919L + 1));
    Instant at = Instant.ofEpochMilli(1_700_000_000_000L + i * 86_400_123L);
    List<String> tags = i % 2 == 0 ? List.of("tag" + i, "x'y") : List.of("tag" + i);
    Map<String, Integer> attrs = new LinkedHashMap<>();
    attrs.put("a", i);
    attrs.put("b", -i);
    ByteBuffer data = ByteBuffer.wrap(new byte[] {(byte) i, (byte) (i + 1), (byte) 0xff});
    return new Object[] {i, name, n, big, d, id, at, tags, attrs, data};
  }

  /** A CQL literal for each value of {@link #row(int)}. */
  static String literals(Object[] r) {
    List<String> parts = new ArrayList<>();
    for (Object v : r) {
      parts.add(literal(v));
    }
    return String.join(", ", parts);
  }

  static String literal(Object v) {
    if (v instanceof String s) {
      return "'" + s.replace("'", "''") + "'";
    }
    if (v instanceof Instant t) {
      return "'" + TS.format(t) + "'";
    }
    if (v instanceof ByteBuffer b) {
      return Render.value(b);
    }
    if (v instanceof List<?> l) {
      List<String> parts = new ArrayList<>();
      for (Object e : l) {
        parts.add(literal(e));
      }
      return "[" + String.join(", ", parts) + "]";
    }
    if (v instanceof Map<?, ?> m) {
      List<String> parts = new ArrayList<>();
      for (Map.Entry<?, ?> e : m.entrySet()) {
        parts.add(literal(e.getKey()) + ": " + literal(e.getValue()));
      }
      return "{" + String.join(", ", parts) + "}";
    }
    return String.valueOf(v);
  }

  // ---- steps ------------------------------------------------------------------------------

  private void schema() {
    exec("DROP KEYSPACE IF EXISTS " + ks);
    exec("CREATE KEYSPACE " + ks
        + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    exec("CREATE TABLE " + ks + ".items (pk int, ck int, name text, n int, big bigint,"
        + " d double, id uuid, at timestamp, tags list<text>, attrs map<text, int>, data blob,"
        + " PRIMARY KEY (pk, ck))");
  }

  private void unpreparedInserts() {
    for (int i = 0; i < ROWS; i++) {
      ResultSet rs = exec("INSERT INTO " + ks + ".items (pk, " + COLUMNS + ") VALUES (1, "
          + literals(row(i)) + ")");
      checks.equal(label + ": unprepared INSERT " + i + " applied", true, rs.wasApplied());
    }
    // UPDATE and DELETE with literals, on rows of their own.
    for (int i = 0; i < REPEAT; i++) {
      exec("INSERT INTO " + ks + ".items (pk, ck, name, n) VALUES (6, " + i + ", 'u" + i + "', "
          + i + ")");
      exec("UPDATE " + ks + ".items SET n = " + (i * 1000) + ", name = 'updated " + i
          + "' WHERE pk = 6 AND ck = " + i);
    }
    exec("DELETE FROM " + ks + ".items WHERE pk = 6 AND ck = 1");
    exec("DELETE name FROM " + ks + ".items WHERE pk = 6 AND ck = 2");
    List<String> expected = List.of(
        Render.values(0, "updated 0", 0),
        Render.values(2, null, 2000),
        Render.values(3, "updated 3", 3000));
    checks.equal(label + ": UPDATE/DELETE with literals", expected,
        rows(exec("SELECT ck, name, n FROM " + ks + ".items WHERE pk = 6")));
  }

  private void unpreparedReads() throws Exception {
    List<String> all = new ArrayList<>();
    for (int i = 0; i < ROWS; i++) {
      all.add(Render.values(row(i)));
    }
    for (int round = 0; round < REPEAT; round++) {
      SimpleStatement st = SimpleStatement.newInstance(
          "SELECT " + COLUMNS + " FROM " + ks + ".items WHERE pk = 1").setPageSize(PAGE);
      paged(label + ": paged unprepared SELECT (round " + round + ")", st, all);
    }
    // Ranges and IN lists with literals: one shape, different literals each time.
    for (int j = 0; j < REPEAT; j++) {
      int from = 10 + 20 * j;
      ResultSet rs = exec("SELECT ck, n FROM " + ks + ".items WHERE pk = 1 AND ck >= " + from
          + " AND ck < " + (from + 5));
      List<String> expected = new ArrayList<>();
      for (int i = from; i < from + 5; i++) {
        expected.add(Render.values(i, row(i)[2]));
      }
      checks.equal(label + ": SELECT range " + from, expected, rows(rs));
      List<Integer> in = List.of(j, j + 30, j + 60, j + 90);
      rs = exec("SELECT ck, big, at FROM " + ks + ".items WHERE pk = 1 AND ck IN (" + in.get(0)
          + ", " + in.get(1) + ", " + in.get(2) + ", " + in.get(3) + ")");
      expected = new ArrayList<>();
      for (int i : in) {
        expected.add(Render.values(i, row(i)[3], row(i)[6]));
      }
      checks.equal(label + ": SELECT IN " + in, expected, rows(rs));
      Object[] r = row(j * 7);
      rs = exec("SELECT ck FROM " + ks + ".items WHERE pk = 1 AND ck = " + (j * 7)
          + " AND name = " + literal(r[1]) + " ALLOW FILTERING");
      checks.equal(label + ": SELECT with a text literal", List.of(Render.values(j * 7)), rows(rs));
    }
  }

  private void prepared() throws Exception {
    PreparedStatement insert = session.prepare(
        "INSERT INTO " + ks + ".items (pk, " + COLUMNS + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (int i = 0; i < 20; i++) {
      Object[] r = row(i);
      Object[] bind = new Object[r.length + 1];
      bind[0] = 2;
      System.arraycopy(r, 0, bind, 1, r.length);
      session.execute(insert.bind(bind));
    }
    PreparedStatement point = session.prepare(
        "SELECT " + COLUMNS + " FROM " + ks + ".items WHERE pk = ? AND ck = ?");
    for (int i = 0; i < 20; i++) {
      checks.equal(label + ": prepared point SELECT " + i, List.of(Render.values(row(i))),
          rows(session.execute(point.bind(2, i))));
    }
    List<String> all = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      all.add(Render.values(row(i)));
    }
    PreparedStatement part = session.prepare(
        "SELECT " + COLUMNS + " FROM " + ks + ".items WHERE pk = ?");
    paged(label + ": paged prepared SELECT", part.bind(2).setPageSize(7), all);
  }

  private void batches() {
    List<String> expected3 = new ArrayList<>();
    List<String> expected4 = new ArrayList<>();
    List<String> expected5 = new ArrayList<>();
    PreparedStatement bound = session.prepare(
        "INSERT INTO " + ks + ".items (pk, ck, name, n) VALUES (?, ?, ?, ?)");
    for (int j = 0; j < REPEAT; j++) {
      int a = 2 * j;
      int b = 2 * j + 1;
      // Text batch: BEGIN BATCH ... APPLY BATCH with literals, one QUERY.
      exec("BEGIN BATCH INSERT INTO " + ks + ".items (pk, ck, name, n) VALUES (3, " + a
          + ", 'text batch " + a + "', " + (a * 11) + "); INSERT INTO " + ks
          + ".items (pk, ck, name, n) VALUES (3, " + b + ", 'text batch " + b + "', " + (b * 11)
          + "); APPLY BATCH");
      expected3.add(Render.values(a, "text batch " + a, a * 11));
      expected3.add(Render.values(b, "text batch " + b, b * 11));
      // The driver's batch API with unprepared children carrying literals (a BATCH message).
      BatchStatement logged = BatchStatement.newInstance(BatchType.LOGGED,
          SimpleStatement.newInstance("INSERT INTO " + ks + ".items (pk, ck, name, n) VALUES (4, "
              + a + ", 'api batch " + a + "', " + (-a) + ")"),
          SimpleStatement.newInstance("UPDATE " + ks + ".items SET name = 'api batch " + b
              + "', n = " + (-b) + " WHERE pk = 4 AND ck = " + b));
      checks.equal(label + ": logged batch " + j + " applied", true,
          session.execute(logged).wasApplied());
      expected4.add(Render.values(a, "api batch " + a, -a));
      expected4.add(Render.values(b, "api batch " + b, -b));
      // Mixed: a text child with literals and a bound child, unlogged.
      BatchStatement mixed = BatchStatement.newInstance(BatchType.UNLOGGED,
          SimpleStatement.newInstance("INSERT INTO " + ks + ".items (pk, ck, name, n) VALUES (5, "
              + a + ", 'mixed " + a + "', " + a + ")"),
          bound.bind(5, b, "mixed " + b, b));
      session.execute(mixed);
      expected5.add(Render.values(a, "mixed " + a, a));
      expected5.add(Render.values(b, "mixed " + b, b));
    }
    checks.equal(label + ": text BEGIN BATCH rows", expected3, rows(exec(
        "SELECT ck, name, n FROM " + ks + ".items WHERE pk = 3")));
    checks.equal(label + ": driver batch API rows", expected4, rows(exec(
        "SELECT ck, name, n FROM " + ks + ".items WHERE pk = 4")));
    checks.equal(label + ": mixed batch rows", expected5, rows(exec(
        "SELECT ck, name, n FROM " + ks + ".items WHERE pk = 5")));
  }

  private void schemaChange() {
    String star = "SELECT * FROM " + ks + ".items WHERE pk = 3 AND ck = 1";
    String before = "pk int, ck int, at timestamp, attrs map<text, int>, big bigint, d double,"
        + " data blob, id uuid, n int, name text, tags list<text>";
    // Unset collections read back as empty ones (the driver's codecs decode null that way).
    Object[] r31 = {3, 1, null, Map.of(), null, null, null, null, 11, "text batch 1", List.of()};
    PreparedStatement driverPrepared = session.prepare(
        "SELECT * FROM " + ks + ".items WHERE pk = ? AND ck = ?");
    for (int i = 0; i < REPEAT; i++) {
      ResultSet rs = exec(star);
      checks.equal(label + ": SELECT * columns before ALTER", before,
          Render.columns(rs.getColumnDefinitions()));
      checks.equal(label + ": SELECT * before ALTER", List.of(Render.values(r31)), rows(rs));
    }
    exec("ALTER TABLE " + ks + ".items ADD extra text");
    String after = "pk int, ck int, at timestamp, attrs map<text, int>, big bigint, d double,"
        + " data blob, extra text, id uuid, n int, name text, tags list<text>";
    Object[] r31null = {3, 1, null, Map.of(), null, null, null, null, null, 11, "text batch 1",
        List.of()};
    ResultSet rs = exec(star);
    checks.equal(label + ": SELECT * columns after ALTER", after,
        Render.columns(rs.getColumnDefinitions()));
    checks.equal(label + ": SELECT * after ALTER", List.of(Render.values(r31null)), rows(rs));
    // The driver's own schema metadata followed the change (SCHEMA_CHANGE came through).
    boolean known = session.getMetadata().getKeyspace(ks)
        .flatMap(k -> k.getTable("items"))
        .flatMap(t -> t.getColumn("extra"))
        .isPresent();
    checks.that(label + ": driver metadata knows the new column", known,
        "items.extra missing from the driver's schema metadata");
    observations.add("metadata knows extra: " + known);
    for (int i = 0; i < REPEAT; i++) {
      exec("UPDATE " + ks + ".items SET extra = 'added " + i + "' WHERE pk = 3 AND ck = 1");
      Object[] r = r31null.clone();
      r[7] = "added " + i;
      rs = exec(star);
      checks.equal(label + ": SELECT * columns after ALTER and UPDATE", after,
          Render.columns(rs.getColumnDefinitions()));
      checks.equal(label + ": SELECT * sees the new column", List.of(Render.values(r)), rows(rs));
    }
    // A statement the driver prepared before the change: on protocol v5 the server's new result
    // metadata id reaches the driver and it reads the new column. v4 has no such mechanism: the
    // driver decodes the new rows with the old metadata and fails (directly as well), so there
    // the outcome is only compared with the control's.
    String outcome;
    String cols = null;
    try {
      rs = session.execute(driverPrepared.bind(3, 1));
      cols = Render.columns(rs.getColumnDefinitions());
      outcome = cols + " / " + rows(rs);
    } catch (RuntimeException e) {
      outcome = e.getClass().getSimpleName() + ": " + e.getMessage();
    }
    observations.add("driver-prepared SELECT * after ALTER: " + outcome);
    if (session.getContext().getProtocolVersion() == DefaultProtocolVersion.V5) {
      checks.equal(label + ": driver-prepared SELECT * columns after ALTER (v5)", after, cols);
    }
  }

  // ---- helpers ----------------------------------------------------------------------------

  /** A step of the workload. */
  private interface Step {
    void run() throws Exception;
  }

  /** Runs a step and says how long it took. */
  private void step(String name, Step s) throws Exception {
    long t0 = System.nanoTime();
    s.run();
    System.out.printf("%s: %s took %d ms%n", label, name, (System.nanoTime() - t0) / 1_000_000);
  }

  /** Executes an unprepared statement (a QUERY with its literals inline) and records its rows. */
  private ResultSet exec(String cql) {
    return session.execute(SimpleStatement.newInstance(cql));
  }

  /** The rows of a result, rendered, also recorded as an observation. */
  private List<String> rows(ResultSet rs) {
    String cols = Render.columns(rs.getColumnDefinitions());
    List<String> out = new ArrayList<>();
    for (Row row : rs) {
      out.add(Render.row(row));
    }
    observations.add(cols + " => " + out);
    return out;
  }

  /**
   * Reads `st` page by page: every page but the last holds exactly the page size, the rows arrive
   * in order and are `expected`. Records the page sizes.
   */
  private void paged(String what, Statement<?> st, List<String> expected)
      throws InterruptedException, ExecutionException {
    int pageSize = st.getPageSize();
    List<String> got = new ArrayList<>();
    List<Integer> sizes = new ArrayList<>();
    AsyncResultSet page = session.executeAsync(st).toCompletableFuture().get();
    while (true) {
      int n = 0;
      for (Row row : page.currentPage()) {
        got.add(Render.row(row));
        n++;
      }
      sizes.add(n);
      if (!page.hasMorePages()) {
        break;
      }
      checks.equal(what + ": size of page " + sizes.size(), pageSize, n);
      page = page.fetchNextPage().toCompletableFuture().get();
    }
    observations.add(what.substring(what.indexOf(": ") + 2) + " pages " + sizes);
    checks.equal(what + ": row count", expected.size(), got.size());
    for (int i = 0; i < Math.max(expected.size(), got.size()); i++) {
      String e = i < expected.size() ? expected.get(i) : "(none)";
      String g = i < got.size() ? got.get(i) : "(none)";
      checks.equal(what + ": row " + i, e, g);
    }
    checks.that(what + ": more than one page", sizes.size() > 1, "pages " + sizes);
  }

  /** The control compares observations with the keyspace name left out. */
  static List<String> neutral(List<String> obs, String ks) {
    List<String> out = new ArrayList<>();
    for (String o : obs) {
      out.add(o.replace(ks, "<ks>"));
    }
    return out;
  }
}
