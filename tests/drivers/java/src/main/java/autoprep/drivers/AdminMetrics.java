package autoprep.drivers;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;

/** Reads autoprep's Prometheus text from its admin endpoint. */
final class AdminMetrics {
  private AdminMetrics() {}

  /** Every sample of `name` (label set → value) on http://admin/metrics. */
  static Map<String, Double> samples(String admin, String name)
      throws IOException, InterruptedException {
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    HttpResponse<String> resp = http.send(
        HttpRequest.newBuilder(URI.create("http://" + admin + "/metrics"))
            .timeout(Duration.ofSeconds(10)).build(),
        HttpResponse.BodyHandlers.ofString());
    if (resp.statusCode() != 200) {
      throw new IOException("GET /metrics answered " + resp.statusCode());
    }
    Map<String, Double> out = new TreeMap<>();
    for (String line : resp.body().split("\n")) {
      if (line.startsWith("#") || !line.startsWith(name)) {
        continue;
      }
      int sp = line.lastIndexOf(' ');
      String series = line.substring(0, sp);
      String rest = series.substring(name.length());
      if (!rest.isEmpty() && !rest.startsWith("{")) {
        continue; // another metric whose name starts with this one
      }
      out.put(rest, Double.parseDouble(line.substring(sp + 1)));
    }
    return out;
  }

  /** The sum of the samples of `name` whose labels contain `label`, e.g. outcome="rewritten". */
  static double sum(String admin, String name, String label)
      throws IOException, InterruptedException {
    double total = 0;
    for (Map.Entry<String, Double> e : samples(admin, name).entrySet()) {
      if (e.getKey().contains(label)) {
        total += e.getValue();
      }
    }
    return total;
  }
}
