package autoprep.drivers;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DriverException;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import com.datastax.oss.driver.api.core.config.ProgrammaticDriverConfigLoaderBuilder;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The Java driver 4.x through autoprep: runs the legacy {@link Workload} through the proxy and,
 * as a control, directly against the node; checks every answer, compares the two runs, compares
 * error messages, checks that the driver stayed on the proxy and that autoprep rewrote queries;
 * then {@link LiteralPrepares}: statements formatted with literals and prepared one by one,
 * compared the same way, with the server's prepared statements counted around each run.
 *
 * <p>Environment: AUTOPREP_DRIVER_TARGET (autoprep, host:port), AUTOPREP_DRIVER_ADMIN (its admin
 * endpoint), AUTOPREP_DRIVER_DIRECT (the node, for the control; default 127.0.0.1:9042),
 * AUTOPREP_DRIVER_JAVA_PROTOCOL (force V4 or V5; default: negotiated).
 * Exit status 0 when everything matched, 1 otherwise.
 */
public final class Main {
  static final String KEYSPACE = "drivers_java";
  static final String APP_PROXIED = "autoprep-drivers-java";
  static final String APP_DIRECT = "autoprep-drivers-java-direct";

  private Main() {}

  public static void main(String[] args) throws Exception {
    InetSocketAddress target = address(required("AUTOPREP_DRIVER_TARGET"));
    String admin = System.getenv("AUTOPREP_DRIVER_ADMIN");
    InetSocketAddress node = address(System.getenv().getOrDefault(
        "AUTOPREP_DRIVER_DIRECT", "127.0.0.1:9042"));
    Checks checks = new Checks();
    long t0 = System.nanoTime();
    watchdog();

    double rewrittenBefore = admin == null ? 0
        : AdminMetrics.sum(admin, "autoprep_queries_total", "outcome=\"rewritten\"");
    try (CqlSession proxied = open(target, APP_PROXIED);
        CqlSession direct = open(node, APP_DIRECT)) {
      System.out.printf("sessions open after %d ms%n", (System.nanoTime() - t0) / 1_000_000);
      System.out.println("java driver " + CqlSession.class.getPackage().getImplementationVersion()
          + ", protocol " + proxied.getContext().getProtocolVersion() + " through autoprep at "
          + target + ", control at " + node);
      List<String> viaProxy = new Workload(proxied, KEYSPACE, checks, "autoprep").run();
      List<String> control =
          new Workload(direct, KEYSPACE + "_direct", checks, "direct").run();
      compare(Workload.neutral(viaProxy, KEYSPACE),
          Workload.neutral(control, KEYSPACE + "_direct"), checks);
      long te = System.nanoTime();
      errors(proxied, direct, checks);
      System.out.printf("errors took %d ms%n", (System.nanoTime() - te) / 1_000_000);
      Topology.driverView(proxied, target, checks);
      Topology.serverView(direct, APP_PROXIED, checks);
      long tl = System.nanoTime();
      LiteralPrepares.check(proxied, direct, KEYSPACE, KEYSPACE + "_direct", admin, checks);
      System.out.printf("literal PREPAREs took %d ms%n", (System.nanoTime() - tl) / 1_000_000);
      direct.execute("DROP KEYSPACE IF EXISTS " + KEYSPACE + "_direct");
    }
    if (admin == null) {
      checks.fail("AUTOPREP_DRIVER_ADMIN is unset: cannot check that autoprep rewrote queries");
    } else {
      double rewritten =
          AdminMetrics.sum(admin, "autoprep_queries_total", "outcome=\"rewritten\"")
              - rewrittenBefore;
      System.out.println("autoprep_queries_total during the run: rewritten +" + (long) rewritten
          + "; all series now " + AdminMetrics.samples(admin, "autoprep_queries_total"));
      checks.that("autoprep rewrote queries of the workload", rewritten > 0,
          "autoprep_queries_total{outcome=\"rewritten\"} did not grow");
    }

    long ms = (System.nanoTime() - t0) / 1_000_000;
    System.out.println();
    if (checks.failures().isEmpty()) {
      System.out.println("java driver: " + checks.passed() + " checks passed in " + ms + " ms");
      System.out.println("java: " + checks.passed() + " passed, 0 failed");
    } else {
      System.out.println("java driver: " + checks.failures().size() + " MISMATCH(ES), "
          + checks.passed() + " checks passed, in " + ms + " ms:");
      for (String f : checks.failures()) {
        System.out.println("  - " + f);
      }
      System.out.println("java: " + checks.passed() + " passed, " + checks.failures().size()
          + " failed");
    }
    System.exit(checks.failures().isEmpty() ? 0 : 1);
  }

  /**
   * Ends the run after five minutes (it takes well under one): a driver in a loop, e.g. preparing
   * again on every UNPREPARED, must not hang the matrix.
   */
  static void watchdog() {
    Thread t = new Thread(() -> {
      try {
        Thread.sleep(Duration.ofMinutes(5).toMillis());
      } catch (InterruptedException e) {
        return;
      }
      System.out.println(
          "java: no result after 5 minutes: a driver loop? (see autoprep's /metrics)");
      System.exit(2);
    }, "watchdog");
    t.setDaemon(true);
    t.start();
  }

  /**
   * A session with generous timeouts (the CI machine is small and busy) and the driver's default
   * load balancing: through autoprep, topology rewriting alone keeps it on the proxy. The local
   * datacenter is named because the driver requires one with explicit contact points.
   */
  static CqlSession open(InetSocketAddress contact, String applicationName) {
    ProgrammaticDriverConfigLoaderBuilder config = DriverConfigLoader.programmaticBuilder()
        .withDuration(DefaultDriverOption.REQUEST_TIMEOUT, Duration.ofSeconds(30))
        .withDuration(DefaultDriverOption.CONNECTION_INIT_QUERY_TIMEOUT, Duration.ofSeconds(15))
        .withDuration(DefaultDriverOption.CONTROL_CONNECTION_TIMEOUT, Duration.ofSeconds(15))
        .withDuration(DefaultDriverOption.METADATA_SCHEMA_REQUEST_TIMEOUT, Duration.ofSeconds(30))
        .withDuration(DefaultDriverOption.CONTROL_CONNECTION_AGREEMENT_TIMEOUT,
            Duration.ofSeconds(30))
        // No native (jnr) clock: loading it costs seconds of class generation on a busy machine.
        .withBoolean(DefaultDriverOption.TIMESTAMP_GENERATOR_FORCE_JAVA_CLOCK, true)
        // Schema metadata of the workload's keyspaces only: the shared node holds many others.
        .withStringList(DefaultDriverOption.METADATA_SCHEMA_REFRESHED_KEYSPACES,
            List.of(KEYSPACE, KEYSPACE + "_direct"));
    String protocol = System.getenv("AUTOPREP_DRIVER_JAVA_PROTOCOL");
    if (protocol != null && !protocol.isEmpty()) {
      config = config.withString(DefaultDriverOption.PROTOCOL_VERSION, protocol);
    }
    return CqlSession.builder()
        .addContactPoint(contact)
        .withLocalDatacenter("datacenter1")
        .withApplicationName(applicationName)
        .withConfigLoader(config.build())
        .build();
  }

  /** Invalid statements: through autoprep the error (class and message) is the node's own. */
  static void errors(CqlSession proxied, CqlSession direct, Checks checks) {
    String ks = KEYSPACE;
    List<String> bad = new ArrayList<>();
    bad.add("SELECT nosuchcolumn FROM " + ks + ".items WHERE pk = 1");
    bad.add("INSERT INTO " + ks + ".items (pk, ck, n) VALUES (1, 1, 'notanint')");
    bad.add("SELEC * FROM " + ks + ".items");
    bad.add("SELECT * FROM " + ks + ".items WHERE pk = 1 AND n = 5");
    bad.add("INSERT INTO " + ks + ".nosuchtable (pk) VALUES (1)");
    // A shape autoprep prepares and rewrites (its valid form runs first), then a value the
    // server rejects only when it executes.
    for (int i = 0; i < Workload.REPEAT; i++) {
      proxied.execute("INSERT INTO " + ks + ".items (pk, ck, n) VALUES (9, " + i
          + ", 1) USING TTL 1000");
    }
    bad.add("INSERT INTO " + ks + ".items (pk, ck, n) VALUES (9, 1, 1) USING TTL -1");
    for (String cql : bad) {
      String expected = error(direct, cql);
      checks.that("direct: error for " + cql, expected != null, "no error");
      // Several times: the first sightings pass through, later ones may be rewritten.
      for (int i = 0; i < Workload.REPEAT; i++) {
        checks.equal("autoprep: error for " + cql + " (try " + i + ")", expected,
            error(proxied, cql));
      }
    }
  }

  /** The error `cql` raises, as "ExceptionClass: message", or null. */
  static String error(CqlSession session, String cql) {
    try {
      session.execute(SimpleStatement.newInstance(cql));
      return null;
    } catch (DriverException e) {
      return e.getClass().getSimpleName() + ": " + e.getMessage();
    }
  }

  static void compare(List<String> viaProxy, List<String> control, Checks checks) {
    checks.equal("autoprep vs direct: number of observations", control.size(), viaProxy.size());
    for (int i = 0; i < Math.min(viaProxy.size(), control.size()); i++) {
      checks.equal("autoprep vs direct: observation " + i, control.get(i), viaProxy.get(i));
    }
  }

  static String required(String name) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) {
      System.err.println(name + " is unset (tests/drivers/java/run.sh sets it)");
      System.exit(2);
    }
    return v;
  }

  static InetSocketAddress address(String hostPort) {
    int colon = hostPort.lastIndexOf(':');
    return new InetSocketAddress(hostPort.substring(0, colon).replace("[", "").replace("]", ""),
        Integer.parseInt(hostPort.substring(colon + 1)));
  }
}
