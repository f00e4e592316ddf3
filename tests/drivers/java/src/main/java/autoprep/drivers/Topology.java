package autoprep.drivers;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import com.datastax.oss.driver.api.core.metadata.Node;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Checking from both ends that the driver, with its default load balancing, stayed on autoprep
 * (topology rewriting is what keeps it there).
 */
final class Topology {
  private Topology() {}

  /** The driver's own view: every node it keeps connections to is autoprep. */
  static void driverView(CqlSession session, InetSocketAddress proxy, Checks checks) {
    int toProxy = 0;
    for (Node node : session.getMetadata().getNodes().values()) {
      SocketAddress addr = node.getEndPoint().resolve();
      int open = node.getOpenConnections();
      System.out.println("driver node " + addr + " distance " + node.getDistance() + " open "
          + open);
      if (proxy.equals(addr)) {
        toProxy += open;
      } else {
        checks.equal("driver: connections to " + addr + " (not autoprep)", 0, open);
      }
    }
    checks.that("driver: connections to autoprep", toProxy > 0, "none open");
  }

  /**
   * The server's view (system_views.clients, read over the direct session): the connections that
   * carry the proxied session's APPLICATION_NAME exist, and none of them is a socket of this
   * process; they are autoprep's upstream connections.
   */
  static void serverView(CqlSession direct, String applicationName, Checks checks)
      throws IOException {
    Set<String> own = ownSockets();
    int seen = 0;
    List<String> directOnes = new ArrayList<>();
    for (Row row : direct.execute(SimpleStatement.newInstance(
        "SELECT address, port, client_options FROM system_views.clients"))) {
      Map<String, String> options = row.getMap("client_options", String.class, String.class);
      if (options == null || !applicationName.equals(options.get("APPLICATION_NAME"))) {
        continue;
      }
      seen++;
      InetAddress addr = row.getInetAddress("address");
      String key = addr.getHostAddress() + ":" + row.getInt("port");
      if (own.contains(key)) {
        directOnes.add(key);
      }
    }
    System.out.println("server: " + seen + " connection(s) of " + applicationName
        + ", of which from this process directly: " + directOnes);
    checks.that("server: the proxied session's connections reach the node", seen > 0,
        "no connection with APPLICATION_NAME " + applicationName + " in system_views.clients");
    checks.equal("server: connections from this process straight to the node", List.of(),
        directOnes);
  }

  /** host:port of every TCP socket this process owns (from /proc, Linux). */
  static Set<String> ownSockets() throws IOException {
    Set<String> inodes = new HashSet<>();
    try (DirectoryStream<Path> fds = Files.newDirectoryStream(Path.of("/proc/self/fd"))) {
      for (Path fd : fds) {
        try {
          String target = Files.readSymbolicLink(fd).toString();
          if (target.startsWith("socket:[")) {
            inodes.add(target.substring(8, target.length() - 1));
          }
        } catch (IOException e) {
          // closed meanwhile
        }
      }
    }
    Set<String> out = new HashSet<>();
    for (String table : List.of("/proc/self/net/tcp", "/proc/self/net/tcp6")) {
      Path p = Path.of(table);
      if (!Files.exists(p)) {
        continue;
      }
      List<String> lines = Files.readAllLines(p);
      for (String line : lines.subList(1, lines.size())) {
        String[] f = line.trim().split("\\s+");
        if (f.length > 9 && inodes.contains(f[9])) {
          out.add(procAddress(f[1]));
        }
      }
    }
    return out;
  }

  /** "0100007F:1F90" (little-endian words) as "127.0.0.1:8080"; IPv4-mapped v6 as v4. */
  static String procAddress(String hex) {
    String[] hp = hex.split(":");
    int port = Integer.parseInt(hp[1], 16);
    String h = hp[0];
    byte[] b = new byte[h.length() / 2];
    for (int w = 0; w < b.length / 4; w++) {
      for (int i = 0; i < 4; i++) {
        int src = w * 8 + (3 - i) * 2;
        b[w * 4 + i] = (byte) Integer.parseInt(h.substring(src, src + 2), 16);
      }
    }
    try {
      InetAddress a = InetAddress.getByAddress(b);
      if (b.length == 16 && isV4Mapped(b)) {
        a = InetAddress.getByAddress(java.util.Arrays.copyOfRange(b, 12, 16));
      }
      return a.getHostAddress() + ":" + port;
    } catch (java.net.UnknownHostException e) {
      return hex;
    }
  }

  private static boolean isV4Mapped(byte[] b) {
    for (int i = 0; i < 10; i++) {
      if (b[i] != 0) {
        return false;
      }
    }
    return b[10] == (byte) 0xff && b[11] == (byte) 0xff;
  }
}
