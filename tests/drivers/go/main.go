// Driver-matrix test for gocql (issue 8): runs the legacy workload of workload.go through
// autoprep, checks that the driver's connections all lead to autoprep and that autoprep
// rewrote statements, then runs the same workload directly against the server as a control and
// requires both transcripts to be identical. Then the literal-PREPARE workload of literal.go:
// statements formatted with literals, which gocql prepares one by one, through autoprep and
// directly (identical transcripts), with the server's prepared statements counted around each
// run (through autoprep they must grow by the number of shapes, not of statements).
//
// Environment (set by tests/drivers/run.sh):
//
//	AUTOPREP_DRIVER_TARGET    autoprep's CQL address, host:port (required)
//	AUTOPREP_DRIVER_ADMIN     autoprep's admin address, host:port (required)
//	AUTOPREP_DRIVER_UPSTREAM  the server itself, host:port; unset or empty: no direct control
//	AUTOPREP_DRIVER_LOG_DIR   where the transcripts are written (go-proxied.txt, go-direct.txt,
//	                          go-literal[_v4]-proxied.txt, go-literal[_v4]-direct.txt); unset:
//	                          not written
//
// gocql runs with its default host selection and no host filter: autoprep's topology rewriting
// alone must keep it on autoprep, which the connection check proves.
//
// Exits 0 when everything matched, 1 on any mismatch, 2 when it could not run at all.
package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/apache/cassandra-gocql-driver/v2/lz4"
)

const name = "go (gocql)"

// watchdog bounds the whole run (it takes well under a minute).
const watchdog = 5 * time.Minute

type config struct {
	target, admin, upstream, logDir string
}

func main() {
	cfg := config{
		target:   os.Getenv("AUTOPREP_DRIVER_TARGET"),
		admin:    os.Getenv("AUTOPREP_DRIVER_ADMIN"),
		upstream: os.Getenv("AUTOPREP_DRIVER_UPSTREAM"),
		logDir:   os.Getenv("AUTOPREP_DRIVER_LOG_DIR"),
	}
	if cfg.target == "" || cfg.admin == "" {
		fmt.Fprintf(os.Stderr, "%s: AUTOPREP_DRIVER_TARGET and AUTOPREP_DRIVER_ADMIN must be set\n", name)
		os.Exit(2)
	}
	// A driver in a loop (gocql prepares again on every UNPREPARED, without a bound) must not
	// hang the matrix.
	time.AfterFunc(watchdog, func() {
		fmt.Printf("%s: ERROR no result after %s: a driver loop? (see autoprep's /metrics)\n", name, watchdog)
		os.Exit(2)
	})
	passed, err := run(cfg)
	switch {
	case err != nil:
		fmt.Printf("%s: ERROR %v\n", name, err)
		os.Exit(2)
	case !passed:
		fmt.Printf("%s: FAIL\n", name)
		os.Exit(1)
	}
	fmt.Printf("%s: PASS\n", name)
}

// run runs both phases and prints the summary.
func run(cfg config) (bool, error) {
	var problems []string
	target, err := resolve(cfg.target)
	if err != nil {
		return false, err
	}

	// Through autoprep.
	before, err := takeSnapshot(cfg.admin)
	if err != nil {
		return false, err
	}
	proxied, session := runWorkload(func(ks string) (*gocql.Session, error) {
		return connect(cfg.target, ks)
	})
	var connections string
	var connErr error
	if session != nil {
		connections, connErr = checkConnections(target, cfg.admin)
		session.Close()
	}
	after, err := takeSnapshot(cfg.admin)
	if err != nil {
		return false, err
	}
	save(cfg, "proxied", proxied.transcript)

	fmt.Printf("%s through autoprep %s: %d observations, %d failures\n", name, cfg.target,
		len(proxied.transcript), len(proxied.failures))
	for _, f := range proxied.failures {
		fmt.Printf("  FAILED %s\n", f)
		problems = append(problems, "through autoprep: "+f)
	}
	switch {
	case connErr != nil:
		fmt.Printf("  connections: FAILED %v\n", connErr)
		problems = append(problems, connErr.Error())
	case session != nil:
		fmt.Printf("  connections: %s\n", connections)
	}
	fmt.Printf("  autoprep QUERY outcomes: %s\n", strings.Join(after.metrics.queryOutcomesSince(before.metrics), ", "))
	// gocql prepares every DML statement itself: of this workload, only the batch children
	// reach autoprep as text.
	queries, batches := rewrites(before, after, keyspace)
	fmt.Printf("  autoprep rewrote %g QUERYs of the workload (keyspace %s) and %g BATCH messages\n", queries, keyspace, batches)
	if batches <= 0 {
		fmt.Printf("  FAILED autoprep rewrote no BATCH of argument-less statements\n")
		problems = append(problems, "autoprep rewrote no batch of this driver")
	}

	// Directly against the server: the control.
	if cfg.upstream == "" {
		fmt.Printf("%s directly: skipped (AUTOPREP_DRIVER_UPSTREAM is not set)\n", name)
	} else {
		direct, session := runWorkload(func(ks string) (*gocql.Session, error) {
			return connect(cfg.upstream, ks)
		})
		if session != nil {
			session.Close()
		}
		save(cfg, "direct", direct.transcript)
		fmt.Printf("%s directly %s: %d observations, %d failures\n", name, cfg.upstream,
			len(direct.transcript), len(direct.failures))
		for _, f := range direct.failures {
			fmt.Printf("  FAILED %s\n", f)
			problems = append(problems, "directly: "+f)
		}
		diffs := differences(proxied.transcript, direct.transcript)
		if len(diffs) == 0 {
			fmt.Println("  through autoprep and directly: identical transcripts")
		} else {
			fmt.Printf("  through autoprep and directly: %d differences\n", len(diffs))
			for i, d := range diffs {
				if i == 20 {
					break
				}
				fmt.Println(d)
			}
			problems = append(problems, fmt.Sprintf("%d transcript differences", len(diffs)))
		}
	}

	// Statements formatted with literals and prepared one by one (literal.go).
	problems = append(problems, literalPrepares(cfg)...)
	return len(problems) == 0, nil
}

// connect opens a gocql session to addr (host:port), in keyspace ks when not empty, with
// gocql's default host selection policy and no host filter.
func connect(addr, ks string) (*gocql.Session, error) { return connectProto(addr, ks, 0) }

// connectProto is connect on protocol version proto (0: the one gocql negotiates).
func connectProto(addr, ks string, proto int) (*gocql.Session, error) {
	// The contact point's port stays the port of the node gocql reaches first; nodes it learns
	// of later (system.peers) would be dialled at ClusterConfig.Port.
	cluster := gocql.NewCluster(addr)
	cluster.ProtoVersion = proto
	cluster.Keyspace = ks
	cluster.Compressor = &lz4.LZ4Compressor{}
	cluster.Consistency = gocql.One
	cluster.Timeout = 30 * time.Second
	cluster.ConnectTimeout = 10 * time.Second
	session, err := cluster.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	return session, nil
}

func resolve(addr string) ([]netip.AddrPort, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	var out []netip.AddrPort
	for _, ip := range ips {
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, netip.AddrPortFrom(a.Unmap(), uint16(port)))
		}
	}
	return out, nil
}

// checkConnections requires every TCP connection this process holds to lead to autoprep, and
// autoprep to count as many client connections (the driver is its only client now).
// Connections open in the background, so the two counts are compared until they agree, a
// bounded number of times.
func checkConnections(target []netip.AddrPort, admin string) (string, error) {
	isTarget := func(a netip.AddrPort) bool {
		for _, t := range target {
			if t == a {
				return true
			}
		}
		return false
	}
	var last string
	for i := 0; i < 50; i++ {
		remotes, err := establishedRemotes()
		if err != nil {
			return "", fmt.Errorf("reading /proc: %w", err)
		}
		m, err := scrape(admin)
		if err != nil {
			return "", err
		}
		toAutoprep := 0
		var elsewhere []string
		for _, r := range remotes {
			if isTarget(r) {
				toAutoprep++
			} else {
				elsewhere = append(elsewhere, r.String())
			}
		}
		counted := m[connectionsSample]
		last = fmt.Sprintf("%d to autoprep, %d elsewhere %v; autoprep counts %g client connections",
			toAutoprep, len(elsewhere), elsewhere, counted)
		if len(elsewhere) == 0 && toAutoprep > 0 && float64(toAutoprep) == counted {
			return last, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("%s", last)
}

// save writes a transcript to AUTOPREP_DRIVER_LOG_DIR/go-{phase}.txt, for a look after a failure.
func save(cfg config, phase string, transcript []string) {
	if cfg.logDir == "" {
		return
	}
	path := filepath.Join(cfg.logDir, "go-"+phase+".txt")
	if err := os.WriteFile(path, []byte(strings.Join(transcript, "\n")+"\n"), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "%s: writing %s: %v\n", name, path, err)
	}
}

// differences lists the lines that differ between the two transcripts, readably.
func differences(proxied, direct []string) []string {
	var out []string
	at := func(t []string, i int) string {
		if i < len(t) {
			return t[i]
		}
		return "(nothing)"
	}
	for i := 0; i < max(len(proxied), len(direct)); i++ {
		if p, d := at(proxied, i), at(direct, i); p != d {
			out = append(out, fmt.Sprintf("  #%d\n    through autoprep: %s\n    directly:         %s", i, p, d))
		}
	}
	return out
}
