package autoprep.drivers;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.cql.AsyncResultSet;
import com.datastax.oss.driver.api.core.cql.BatchStatement;
import com.datastax.oss.driver.api.core.cql.BatchStatementBuilder;
import com.datastax.oss.driver.api.core.cql.BatchType;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ExecutionException;

/**
 * The literal-PREPARE workload (issue 17): an application that builds each statement with
 * {@code String.format}, values inline, and calls {@code session.prepare} on it before executing
 * {@code ps.bind(...)}. Directly, every distinct text costs the server a PREPARE and a slot of its
 * prepared-statement cache; autoprep answers such a PREPARE from the statement's shape, so through
 * it the server's prepared statements grow by the number of shapes, not of statements.
 *
 * <p>The plan comes from a seeded RNG: a few hundred statements of a dozen shapes (INSERTs of
 * every column type, with and without a marker of the client's own, SELECTs by partition, with a
 * bound marker, point and IN SELECTs, paged SELECTs, UPDATE, DELETE, INSERT ... IF NOT EXISTS, a
 * batch of statements prepared one by one, a BEGIN BATCH text), each text naming the keyspace
 * (its prepared id is md5 of the text). It runs through autoprep and directly, in the keyspaces
 * of {@link Main}, tables lit_rows and lit_lwt, then an ALTER TABLE (the server drops the
 * table's prepared statements) and statements the driver prepared before it again. Every result
 * (columns and types, rows, [applied], page sizes, errors) is an observation and both runs must
 * observe the same. The server's prepared statements of the workload are counted around each
 * run's statements before the ALTER (system.prepared_statements): through autoprep about two a
 * shape, directly one a text. autoprep_literal_prepares_total{outcome="answered"} must grow.
 */
final class LiteralPrepares {
  /** Both runs send the very statements this seed draws. */
  static final long SEED = 17;
  /** Page size of the paged SELECTs. */
  static final int PAGE = 4;
  /** Stands for the run's keyspace in a statement text. */
  static final String KS = "{ks}";
  /**
   * Through autoprep the server may hold, per shape, the shape and the text whose PREPARE first
   * showed it (autoprep passes that one through while it prepares the shape), and this many more
   * (a PREPARE that came again before the shape was ready, the driver's own statements).
   */
  static final int SLACK = 6;

  private static final DateTimeFormatter TS =
      DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss.SSSxx").withZone(ZoneOffset.UTC);

  /** One statement of the plan (children set: a batch of them). */
  record Op(String shape, String text, List<Object> args, int pageSize, boolean lwt,
      List<Op> children) {
    static Op of(String shape, String text, Object... args) {
      return new Op(shape, text, List.of(args), 0, false, null);
    }

    /** A schema change, executed as a plain statement. */
    boolean ddl() {
      return shape.equals("ddl");
    }
  }

  /**
   * The plan: the statements around which the server's prepared statements are counted, their
   * shapes and number of distinct texts; then the statements of {@link #schemaChange}.
   */
  record Plan(List<Op> ops, Set<String> shapes, int texts, int statements, List<Op> after) {}

  /** What one run saw. */
  static final class Run {
    final List<String> observations = new ArrayList<>();
    int applied;
    int notApplied;
    int pages;
    int added; // workload texts the server newly holds prepared
    double cacheGrowth; // growth of the server's prepared_statements_count
    double evicted; // statements the server evicted from its cache meanwhile
    long ms;
  }

  // ---- the plan -----------------------------------------------------------------------------

  private final Random rng;

  private LiteralPrepares(long seed) {
    rng = new Random(seed);
  }

  static Plan plan(long seed) {
    LiteralPrepares g = new LiteralPrepares(seed);
    List<Op> ops = new ArrayList<>();
    for (int i = 0; i < 60; i++) {
      ops.add(g.insertRow());
    }
    List<Op> mixed = new ArrayList<>();
    g.add(mixed, 60, g::insertRow);
    g.add(mixed, 25, g::insertBound);
    g.add(mixed, 30, g::update);
    g.add(mixed, 12, g::deleteRow);
    g.add(mixed, 8, g::deleteCells);
    g.add(mixed, 35, g::lwt);
    g.add(mixed, 8, g::batch);
    g.add(mixed, 3, g::textBatch);
    g.add(mixed, 20, g::selectPartition);
    g.add(mixed, 20, g::selectFrom);
    g.add(mixed, 20, g::selectPoint);
    g.add(mixed, 10, g::selectIn);
    g.add(mixed, 6, g::selectPaged);
    Collections.shuffle(mixed, g.rng);
    ops.addAll(mixed);
    Set<String> shapes = new TreeSet<>();
    Set<String> texts = new HashSet<>();
    int statements = 0;
    for (Op op : ops) {
      for (Op s : op.children() == null ? List.of(op) : op.children()) {
        shapes.add(s.shape());
        texts.add(s.text());
        statements++;
      }
    }
    return new Plan(ops, shapes, texts.size(), statements, g.schemaChange());
  }

  /**
   * Reads partitions with statements prepared before (the driver holds their ids), adds a
   * column (the server drops the table's prepared statements), reads them again with those ids,
   * writes the new column and reads it.
   */
  private List<Op> schemaChange() {
    List<Op> ops = new ArrayList<>();
    Runnable star = () -> {
      for (int k = 0; k < 3; k++) {
        ops.add(Op.of("select-partition", "SELECT * FROM " + KS + ".lit_rows WHERE k = " + k));
      }
    };
    star.run();
    ops.add(Op.of("ddl", "ALTER TABLE " + KS + ".lit_rows ADD extra text"));
    star.run();
    for (int i = 0; i < 6; i++) {
      ops.add(Op.of("insert-extra", String.format(Locale.ROOT, "INSERT INTO " + KS
          + ".lit_rows (k, c, extra) VALUES (%d, %d, %s)", rng.nextInt(3), c(), quote(text()))));
    }
    star.run();
    for (int i = 0; i < 4; i++) {
      ops.add(Op.of("select-extra", String.format(Locale.ROOT, "SELECT c, extra, name FROM " + KS
          + ".lit_rows WHERE k = %d AND c >= %d", rng.nextInt(3), c())));
    }
    return ops;
  }

  private interface Gen {
    Op op();
  }

  private void add(List<Op> to, int n, Gen gen) {
    for (int i = 0; i < n; i++) {
      to.add(gen.op());
    }
  }

  private int k() {
    return rng.nextInt(6);
  }

  private int c() {
    return rng.nextInt(40);
  }

  /** A text value: quotes, non-ASCII, ';' and comment markers now and then. */
  private String text() {
    String[] words = {"it's", "ünïcödé ✓", "a;b", "-- not a comment", "/* nor this */", "plain",
        "O''Brien", ""};
    return words[rng.nextInt(words.length)] + " " + rng.nextInt(100000);
  }

  static String quote(String s) {
    return "'" + s.replace("'", "''") + "'";
  }

  private String bigint() {
    switch (rng.nextInt(20)) {
      case 0:
        return String.valueOf(Long.MIN_VALUE);
      case 1:
        return String.valueOf(Long.MAX_VALUE);
      default:
        long v = rng.nextLong() >> 14;
        return String.valueOf(v);
    }
  }

  private String dbl() {
    double x = (rng.nextDouble() - 0.5) * 1e6;
    switch (rng.nextInt(4)) {
      case 0:
        return String.format(Locale.ROOT, "%.3e", x); // scientific notation
      case 1:
        return String.valueOf((long) x); // an integer literal for a double
      default:
        return String.format(Locale.ROOT, "%.2f", x);
    }
  }

  private String uuid() {
    long msb = rng.nextLong() & ~0xf000L | 0x4000L;
    long lsb = rng.nextLong() & 0x3fffffffffffffffL | 0x8000000000000000L;
    return new UUID(msb, lsb).toString();
  }

  /** A string with a zone, or milliseconds since the epoch. */
  private String timestamp() {
    long ms = 1_767_322_805_000L + (long) (rng.nextDouble() * 400L * 24 * 3600 * 1000);
    return rng.nextBoolean() ? String.valueOf(ms) : quote(TS.format(Instant.ofEpochMilli(ms)));
  }

  private String blob() {
    byte[] b = new byte[rng.nextInt(6)];
    rng.nextBytes(b);
    return "0x" + HexFormat.of().formatHex(b);
  }

  private String list() {
    List<String> parts = new ArrayList<>();
    for (int i = rng.nextInt(4); i > 0; i--) {
      parts.add(quote(text()));
    }
    return "[" + String.join(", ", parts) + "]";
  }

  private String set() {
    List<String> parts = new ArrayList<>();
    for (int i = 1 + rng.nextInt(3); i > 0; i--) {
      parts.add(String.valueOf(rng.nextInt(2000) - 1000));
    }
    return "{" + String.join(", ", parts) + "}";
  }

  /**
   * A map with distinct keys: of a literal map with a key twice, Cassandra keeps either value
   * (the same text prepared twice may keep the other one).
   */
  private String map() {
    List<Character> keys = new ArrayList<>(List.of('a', 'b', 'c', 'd', 'e'));
    Collections.shuffle(keys, rng);
    List<String> parts = new ArrayList<>();
    for (char key : keys.subList(0, 1 + rng.nextInt(3))) {
      parts.add("'" + key + "': " + (rng.nextInt(200) - 100));
    }
    return "{" + String.join(", ", parts) + "}";
  }

  private Op insertRow() {
    return Op.of("insert-row", String.format(Locale.ROOT, "INSERT INTO " + KS
        + ".lit_rows (k, c, name, big, id, at, score, flag, data, tags, labels, attrs)"
        + " VALUES (%d, %d, %s, %s, %s, %s, %s, %b, %s, %s, %s, %s)", k(), c(), quote(text()),
        bigint(), uuid(), timestamp(), dbl(), rng.nextBoolean(), blob(), list(), set(), map()));
  }

  /** An INSERT with a marker of the client's own among the literals. */
  private Op insertBound() {
    return Op.of("insert-bound", String.format(Locale.ROOT, "INSERT INTO " + KS
        + ".lit_rows (k, c, name, score) VALUES (%d, %d, ?, %s)", k(), c(), dbl()), text());
  }

  private Op update() {
    return Op.of("update", String.format(Locale.ROOT, "UPDATE " + KS + ".lit_rows SET name = %s,"
        + " score = %s, labels = labels + %s WHERE k = %d AND c = %d", quote(text()), dbl(), set(),
        k(), c()));
  }

  private Op deleteRow() {
    return Op.of("delete-row", String.format(Locale.ROOT,
        "DELETE FROM " + KS + ".lit_rows WHERE k = %d AND c = %d", k(), c()));
  }

  private Op deleteCells() {
    return Op.of("delete-cells", String.format(Locale.ROOT,
        "DELETE name, tags FROM " + KS + ".lit_rows WHERE k = %d AND c = %d", k(), c()));
  }

  /** A small key range: some apply, the others return the row that is there. */
  private Op lwt() {
    return new Op("lwt", String.format(Locale.ROOT, "INSERT INTO " + KS
        + ".lit_lwt (k, v, n) VALUES (%d, %s, %s) IF NOT EXISTS", rng.nextInt(20), quote(text()),
        bigint()), List.of(), 0, true, null);
  }

  /** A batch of statements prepared one by one, each formatted with literals. */
  private Op batch() {
    List<Op> children = new ArrayList<>();
    for (int i = 2 + rng.nextInt(2); i > 0; i--) {
      if (rng.nextBoolean()) {
        children.add(Op.of("batch-insert", String.format(Locale.ROOT, "INSERT INTO " + KS
            + ".lit_rows (k, c, name, big) VALUES (%d, %d, ?, %s)", k(), c(), bigint()), text()));
      } else {
        children.add(Op.of("batch-update", String.format(Locale.ROOT, "UPDATE " + KS
            + ".lit_rows SET score = %s, flag = %b WHERE k = %d AND c = %d", dbl(),
            rng.nextBoolean(), k(), c())));
      }
    }
    return new Op("batch", "", List.of(), 0, false, children);
  }

  /** A BEGIN BATCH ... APPLY BATCH text, prepared as a whole. */
  private Op textBatch() {
    int k = k();
    return Op.of("text-batch", String.format(Locale.ROOT, "BEGIN BATCH INSERT INTO " + KS
        + ".lit_rows (k, c, name) VALUES (%d, %d, %s); UPDATE " + KS
        + ".lit_rows SET big = %s WHERE k = %d AND c = %d; APPLY BATCH", k, c(), quote(text()),
        bigint(), k, c()));
  }

  private Op selectPartition() {
    return Op.of("select-partition", "SELECT * FROM " + KS + ".lit_rows WHERE k = " + k());
  }

  /** The clustering key bounded by a marker of the client's own. */
  private Op selectFrom() {
    return Op.of("select-from", "SELECT k, c, name, big, tags FROM " + KS
        + ".lit_rows WHERE k = " + k() + " AND c >= ?", c());
  }

  private Op selectPoint() {
    return Op.of("select-point", String.format(Locale.ROOT, "SELECT name, score, flag, id, at,"
        + " data, labels, attrs FROM " + KS + ".lit_rows WHERE k = %d AND c = %d", k(), c()));
  }

  private Op selectIn() {
    return Op.of("select-in", String.format(Locale.ROOT, "SELECT c, name, big FROM " + KS
        + ".lit_rows WHERE k = %d AND c IN (%d, %d, %d)", k(), c(), c(), c()));
  }

  private Op selectPaged() {
    return new Op("select-paged", "SELECT k, c, name, big, score FROM " + KS
        + ".lit_rows WHERE k = " + k(), List.of(), PAGE, false, null);
  }

  // ---- a run --------------------------------------------------------------------------------

  /** Creates the workload's tables in ks (the keyspace exists: {@link Workload} made it). */
  static void schema(CqlSession session, String ks) {
    for (String cql : List.of(
        "DROP TABLE IF EXISTS " + ks + ".lit_rows",
        "DROP TABLE IF EXISTS " + ks + ".lit_lwt",
        "CREATE TABLE " + ks + ".lit_rows (k int, c int, name text, big bigint, id uuid,"
            + " at timestamp, score double, flag boolean, data blob, tags list<text>,"
            + " labels set<int>, attrs map<text, int>, PRIMARY KEY (k, c))",
        "CREATE TABLE " + ks + ".lit_lwt (k int PRIMARY KEY, v text, n bigint)")) {
      session.execute(SimpleStatement.newInstance(cql));
    }
  }

  /**
   * Runs the plan on session in keyspace ks, counting on server (a session to the node itself)
   * the prepared statements it adds.
   */
  static Run run(CqlSession session, CqlSession server, String ks, Plan plan) throws Exception {
    long t0 = System.nanoTime();
    schema(session, ks);
    Run run = new Run();
    Set<String> before = preparedTexts(server, ks);
    double[] c0 = cacheCounts(server);
    ops(session, ks, plan.ops(), 0, run);
    Set<String> after = preparedTexts(server, ks);
    after.removeAll(before);
    run.added = after.size();
    double[] c1 = cacheCounts(server);
    run.cacheGrowth = c1[0] - c0[0];
    run.evicted = c1[1] - c0[1];
    // After the count: the schema change drops the table's prepared statements on the server.
    ops(session, ks, plan.after(), plan.ops().size(), run);
    // The end state of both tables, whole.
    ops(session, ks, List.of(Op.of("end", "SELECT * FROM " + KS + ".lit_rows"),
        Op.of("end", "SELECT * FROM " + KS + ".lit_lwt")),
        plan.ops().size() + plan.after().size(), run);
    run.observations.add("LWT applied " + run.applied + ", not applied " + run.notApplied
        + "; " + run.pages + " pages");
    run.ms = (System.nanoTime() - t0) / 1_000_000;
    return run;
  }

  /** Runs ops (numbered from first on), recording what they return in run. */
  private static void ops(CqlSession session, String ks, List<Op> ops, int first, Run run)
      throws InterruptedException {
    for (int j = 0; j < ops.size(); j++) {
      Op op = ops.get(j);
      String tag = "#" + (first + j) + " ";
      try {
        if (op.ddl()) {
          session.execute(SimpleStatement.newInstance(op(op, ks)));
          run.observations.add(tag + op.text() + " => ok");
        } else if (op.children() != null) {
          BatchStatementBuilder b = BatchStatement.builder(BatchType.LOGGED);
          for (Op c : op.children()) {
            b.addStatement(session.prepare(op(c, ks)).bind(c.args().toArray()));
          }
          ResultSet rs = session.execute(b.build());
          run.observations.add(tag + "batch of " + op.children().size() + " applied "
              + rs.wasApplied());
          for (Op c : op.children()) {
            run.observations.add("  " + c.text() + " " + c.args());
          }
        } else if (op.pageSize() > 0) {
          BoundStatement st = session.prepare(op(op, ks)).bind(op.args().toArray())
              .setPageSize(op.pageSize());
          List<Integer> sizes = new ArrayList<>();
          AsyncResultSet page = session.executeAsync(st).toCompletableFuture().get();
          while (true) {
            List<String> rows = new ArrayList<>();
            for (Row row : page.currentPage()) {
              rows.add(Render.row(row));
            }
            sizes.add(rows.size());
            run.observations.add(tag + op.text() + " page " + sizes.size() + " => "
                + Render.columns(page.getColumnDefinitions()) + " " + rows);
            if (!page.hasMorePages() || sizes.size() > 100) {
              break;
            }
            page = page.fetchNextPage().toCompletableFuture().get();
          }
          run.pages += sizes.size();
          run.observations.add(tag + "pages " + sizes);
        } else {
          PreparedStatement ps = session.prepare(op(op, ks));
          ResultSet rs = session.execute(ps.bind(op.args().toArray()));
          boolean applied = rs.wasApplied(); // [applied], read before the rows
          List<String> rows = new ArrayList<>();
          for (Row row : rs) {
            rows.add(Render.row(row));
          }
          run.observations.add(tag + op.text() + " " + op.args() + " => "
              + Render.columns(rs.getColumnDefinitions()) + " " + rows);
          if (op.lwt()) {
            run.observations.add(tag + "applied " + applied);
            if (applied) {
              run.applied++;
            } else {
              run.notApplied++;
            }
          }
        }
      } catch (RuntimeException | ExecutionException e) {
        // A driver error, or on protocol v4 a row decoded with metadata from before the ALTER
        // (the driver's own failure, directly as well): an observation like any other.
        Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        run.observations.add(tag + op.text() + " => " + t.getClass().getSimpleName() + ": "
            + t.getMessage());
      }
    }
  }

  private static String op(Op op, String ks) {
    return op.text().replace(KS, ks);
  }

  /**
   * The distinct statement texts the server holds prepared for the workload's tables in ks:
   * system.prepared_statements, which Cassandra writes for every statement it prepares and clears
   * of a table's statements when the table is dropped. Every text of this workload names its
   * keyspace. (system_views.cql_metrics' prepared_statements_count is the server's whole cache:
   * every client's statements, and a text prepared without a keyspace counts twice there.)
   */
  static Set<String> preparedTexts(CqlSession server, String ks) {
    Set<String> out = new HashSet<>();
    for (Row row : server.execute(SimpleStatement.newInstance(
        "SELECT query_string FROM system.prepared_statements").setPageSize(5000))) {
      String text = row.getString(0);
      if (text != null && text.contains(ks + ".lit_")) {
        out.add(text);
      }
    }
    return out;
  }

  /** The server's prepared_statements_count and _evicted (system_views.cql_metrics). */
  static double[] cacheCounts(CqlSession server) {
    double[] out = {Double.NaN, Double.NaN};
    for (Row row : server.execute(SimpleStatement.newInstance(
        "SELECT name, value FROM system_views.cql_metrics"))) {
      switch (row.getString(0)) {
        case "prepared_statements_count" -> out[0] = row.getDouble(1);
        case "prepared_statements_evicted" -> out[1] = row.getDouble(1);
        default -> { }
      }
    }
    return out;
  }

  // ---- the check ----------------------------------------------------------------------------

  /**
   * Runs the workload through autoprep (proxied, keyspace ks) and directly (direct, keyspace
   * ksDirect), compares them and checks the server's prepared statements and autoprep's metrics.
   */
  static void check(CqlSession proxied, CqlSession direct, String ks, String ksDirect,
      String admin, Checks checks) throws Exception {
    Plan plan = plan(SEED);
    System.out.printf(
        "literal PREPAREs (seed %d): %d statements, %d distinct texts, %d shapes %s%n", SEED,
        plan.statements(), plan.texts(), plan.shapes().size(), plan.shapes());
    Map<String, Double> before = admin == null ? Map.of()
        : AdminMetrics.samples(admin, "autoprep_literal_prepares_total");
    Run viaProxy = run(proxied, direct, ks, plan);
    Map<String, Double> after = admin == null ? Map.of()
        : AdminMetrics.samples(admin, "autoprep_literal_prepares_total");
    Run control = run(direct, direct, ksDirect, plan);
    report("through autoprep", viaProxy);
    report("directly", control);

    List<String> moved = new ArrayList<>();
    double answered = 0;
    for (Map.Entry<String, Double> e : after.entrySet()) {
      double d = e.getValue() - before.getOrDefault(e.getKey(), 0.0);
      if (d != 0) {
        moved.add(e.getKey() + " +" + (long) d);
      }
      if (e.getKey().contains("outcome=\"answered\"")) {
        answered += d;
      }
    }
    System.out.println("  autoprep_literal_prepares_total during the run: "
        + (moved.isEmpty() ? "no sample moved" : String.join(", ", moved)));
    checks.that("literal PREPAREs: autoprep answered PREPAREs from shapes", answered > 0,
        "autoprep_literal_prepares_total{outcome=\"answered\"} did not grow ("
            + (moved.isEmpty() ? "no sample moved" : String.join(", ", moved))
            + "): is --prepare-literals on, and does this autoprep have issue 17?");
    int allowed = 2 * plan.shapes().size() + SLACK;
    checks.that("literal PREPAREs: server prepared statements through autoprep",
        viaProxy.added <= allowed, "the server now holds " + viaProxy.added
            + " more prepared texts of the workload, for " + plan.shapes().size()
            + " shapes (at most " + allowed + " allowed: 2 a shape + " + SLACK + ") and "
            + plan.texts() + " distinct texts:"
            + " the server's prepared statements grew with the statements, not the shapes");
    // Directly every distinct text (half, in case a full server cache evicted some meanwhile).
    checks.that("literal PREPAREs: server prepared statements directly",
        control.added >= plan.texts() / 2, "the server holds only " + control.added
            + " more prepared texts of the workload for " + plan.texts() + " distinct texts"
            + " (evicted meanwhile: " + control.evicted + "): the count does not see the"
            + " driver's PREPAREs");
    checks.that("literal PREPAREs: variety", viaProxy.applied > 0 && viaProxy.notApplied > 0
        && viaProxy.pages > 6, "LWT applied " + viaProxy.applied + ", not applied "
        + viaProxy.notApplied + ", " + viaProxy.pages + " pages");
    List<String> a = Workload.neutral(viaProxy.observations, ks);
    List<String> b = Workload.neutral(control.observations, ksDirect);
    int before0 = checks.failures().size();
    Main.compare(a, b, checks);
    int diffs = checks.failures().size() - before0;
    System.out.println("  through autoprep and directly: "
        + (diffs == 0 ? "identical observations (" + a.size() + ")" : diffs + " DIFFERENCES"));
  }

  private static void report(String how, Run run) {
    System.out.printf("  %s: %d ms, %d observations, LWT applied %d / not %d, %d pages; the"
        + " server's prepared statements of the workload +%d (system.prepared_statements), its"
        + " whole cache %+.0f, evicted %+.0f (system_views.cql_metrics)%n", how, run.ms,
        run.observations.size(), run.applied, run.notApplied, run.pages, run.added,
        run.cacheGrowth, run.evicted);
  }
}
