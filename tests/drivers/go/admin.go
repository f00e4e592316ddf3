// autoprep's admin endpoint: fetches /metrics and reads the samples the driver test checks.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// metrics is one scrape of /metrics: sample name with labels → value.
type metrics map[string]float64

const (
	rewrittenSample   = `autoprep_queries_total{outcome="rewritten",reason=""}`
	connectionsSample = "autoprep_client_connections"
)

var adminClient = &http.Client{
	Timeout: 10 * time.Second,
	// A new connection per scrape, closed at once: the connection check counts this
	// process's sockets.
	Transport: &http.Transport{DisableKeepAlives: true},
}

// get fetches http://admin/path.
func get(admin, path string) ([]byte, error) {
	resp, err := adminClient.Get("http://" + admin + path)
	if err != nil {
		return nil, fmt.Errorf("admin %s: %w", admin, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("admin %s: %w", admin, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("admin %s%s: %s", admin, path, resp.Status)
	}
	return body, nil
}

// scrape fetches /metrics.
func scrape(admin string) (metrics, error) {
	body, err := get(admin, "/metrics")
	if err != nil {
		return nil, err
	}
	return parseMetrics(string(body)), nil
}

// shape is one statement shape of /shapes, with what the check needs of it.
type shape struct {
	Text      string  `json:"text"`
	Keyspace  *string `json:"keyspace"`
	Rewritten float64 `json:"rewritten"`
}

// shapeKey identifies a shape across two scrapes.
func (s shape) key() string {
	ks := ""
	if s.Keyspace != nil {
		ks = *s.Keyspace
	}
	return ks + "\x00" + s.Text
}

// shapes fetches /shapes: every tracked shape (autoprep tracks at most 1000).
func shapes(admin string) (map[string]shape, error) {
	body, err := get(admin, "/shapes?limit=1000")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Shapes []shape `json:"shapes"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("admin %s/shapes: %w", admin, err)
	}
	out := map[string]shape{}
	for _, s := range doc.Shapes {
		out[s.key()] = s
	}
	return out, nil
}

// snapshot is what autoprep has counted at one moment.
type snapshot struct {
	metrics metrics
	shapes  map[string]shape
}

func takeSnapshot(admin string) (snapshot, error) {
	m, err := scrape(admin)
	if err != nil {
		return snapshot{}, err
	}
	s, err := shapes(admin)
	return snapshot{m, s}, err
}

// rewrites splits what autoprep rewrote between two snapshots: QUERYs of the shapes tracked
// in keyspace ks (the workload's own statements; a driver's system queries have none), and
// BATCH messages (not tracked as shapes: the total less every shape's QUERYs).
func rewrites(before, after snapshot, ks string) (queries, batches float64) {
	var allShapes float64
	for k, s := range after.shapes {
		d := s.Rewritten - before.shapes[k].Rewritten
		allShapes += d
		if s.Keyspace != nil && *s.Keyspace == ks {
			queries += d
		}
	}
	total := after.metrics[rewrittenSample] - before.metrics[rewrittenSample]
	return queries, total - allShapes
}

func parseMetrics(body string) metrics {
	m := metrics{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// queryOutcomesSince lists every autoprep_queries_total sample that grew since before.
func (m metrics) queryOutcomesSince(before metrics) []string {
	var out []string
	for k, v := range m {
		if d := v - before[k]; strings.HasPrefix(k, "autoprep_queries_total{") && d > 0 {
			out = append(out, fmt.Sprintf("%s +%g", strings.TrimPrefix(k, "autoprep_queries_total"), d))
		}
	}
	sort.Strings(out)
	return out
}
