// The literal-PREPARE workload (issue 17): the statements a gocql application builds with
// fmt.Sprintf, values inline. gocql prepares every SELECT/INSERT/UPDATE/DELETE/BATCH text it is
// given (Query.shouldPrepare), so each distinct text costs the server a PREPARE and a slot of its
// prepared-statement cache. autoprep answers such a PREPARE from the statement's shape, so through
// it the server's prepared statements grow by the number of shapes, not of statements.
//
// The plan is drawn from a seeded RNG: a few hundred statements of a dozen shapes, run through
// autoprep (keyspace drivers_go_literal) and directly (drivers_go_literal_direct), on the
// protocol gocql negotiates (v5 with Cassandra 5) and again on v4 (drivers_go_literal_v4 and
// _v4_direct), each with a session in its keyspace, so that most texts are unqualified (their
// prepared id is md5 of keyspace + text) and one shape names its keyspace (md5 of the text).
// After the counted statements, an ALTER TABLE: the server drops the table's prepared
// statements, and gocql must learn the new columns (v4: from UNPREPARED and a new PREPARE).
// Every result (column names and types, rows, [applied], page sizes, errors) goes to a
// transcript; the two transcripts must be identical. The server's prepared statements each run
// added are counted (system.prepared_statements, see preparedTexts): through autoprep about two
// a shape, directly one a text. autoprep_literal_prepares_total{outcome="answered"} must grow.

package main

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

const (
	// literalKeyspace holds the run through autoprep; the direct run's is literalKeyspace+"_direct".
	literalKeyspace = "drivers_go_literal"
	// literalSeed seeds the plan: both runs send the very same statements.
	literalSeed = 17
	// literalPage is the page size of the paged SELECTs.
	literalPage = 4
	// ksMark stands for the run's keyspace in a statement text (the shape that names it).
	ksMark = "{ks}"
	// literalSlack: through autoprep the server may hold, per shape, the shape and the text
	// whose PREPARE first showed it (autoprep passes that one through while it prepares the
	// shape), and this many more (a PREPARE that came again before the shape was ready, the
	// driver's own statements).
	literalSlack = 6
)

// literalSchema creates the workload's tables in keyspace ks.
func literalSchema(ks string) []string {
	return []string{
		"DROP KEYSPACE IF EXISTS " + ks,
		"CREATE KEYSPACE " + ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE " + ks + ".lit_rows (k int, c int, name text, big bigint, id uuid, " +
			"at timestamp, score double, flag boolean, data blob, tags list<text>, labels set<int>, " +
			"attrs map<text, int>, PRIMARY KEY (k, c))",
		"CREATE TABLE " + ks + ".lit_lwt (k int PRIMARY KEY, v text, n bigint)",
	}
}

// litOp is one statement of the plan, or a batch of them.
type litOp struct {
	shape    string  // the template it was formatted from
	text     string  // the statement, ksMark for the keyspace
	args     []any   // values of the client's own ? markers
	pageSize int     // > 0: read page by page, this many rows a page
	lwt      bool    // a conditional statement: [applied] is checked
	ddl      bool    // a schema change (gocql sends it as a QUERY)
	batch    []litOp // a gocql batch of these (prepared one by one)
}

// litPlan is the whole workload.
type litPlan struct {
	ops    []litOp  // counted: the server's prepared statements are counted around these
	shapes []string // every shape of ops, sorted
	texts  int      // distinct statement texts of ops (gocql prepares each)
	// after: an ALTER TABLE of lit_rows and the statements gocql prepared before it again
	// (the server drops a table's prepared statements when it changes), and new ones.
	after []litOp
}

// literalPlan draws the plan from seed.
func literalPlan(seed uint64) litPlan {
	g := &litGen{rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
	var ops []litOp
	// Fill the partitions first, then everything mixed.
	for i := 0; i < 60; i++ {
		ops = append(ops, g.insertRow())
	}
	var mixed []litOp
	add := func(n int, f func() litOp) {
		for i := 0; i < n; i++ {
			mixed = append(mixed, f())
		}
	}
	add(60, g.insertRow)
	add(25, g.insertBound)
	add(30, g.update)
	add(12, g.deleteRow)
	add(8, g.deleteCells)
	add(35, g.lwt)
	add(8, g.batch)
	add(3, g.textBatch)
	add(20, g.selectPartition)
	add(20, g.selectFrom)
	add(20, g.selectPoint)
	add(10, g.selectIn)
	add(6, g.selectPaged)
	g.rng.Shuffle(len(mixed), func(i, j int) { mixed[i], mixed[j] = mixed[j], mixed[i] })
	ops = append(ops, mixed...)

	shapes := map[string]bool{}
	texts := map[string]bool{}
	var walk func(op litOp)
	walk = func(op litOp) {
		if op.batch != nil {
			for _, c := range op.batch {
				walk(c)
			}
			return
		}
		shapes[op.shape] = true
		texts[op.text] = true
	}
	for _, op := range ops {
		walk(op)
	}
	plan := litPlan{ops: ops, texts: len(texts), after: g.schemaChange()}
	for s := range shapes {
		plan.shapes = append(plan.shapes, s)
	}
	sort.Strings(plan.shapes)
	return plan
}

// litGen formats statements with random values.
type litGen struct{ rng *rand.Rand }

// partitions of lit_rows and clustering values: about 20 rows a partition.
func (g *litGen) k() int { return g.rng.IntN(6) }
func (g *litGen) c() int { return g.rng.IntN(40) }

// text is a text literal's content: quotes, non-ASCII, ';' and comment markers now and then.
func (g *litGen) text() string {
	words := []string{"it's", "ünïcödé ✓", "a;b", "-- not a comment", "/* nor this */", "plain", "O''Brien", ""}
	return fmt.Sprintf("%s %d", words[g.rng.IntN(len(words))], g.rng.IntN(100000))
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// bigint is negative half of the time, now and then an extreme.
func (g *litGen) bigint() string {
	switch g.rng.IntN(20) {
	case 0:
		return "-9223372036854775808"
	case 1:
		return "9223372036854775807"
	}
	v := g.rng.Int64N(1 << 50)
	if g.rng.IntN(2) == 0 {
		v = -v
	}
	return strconv.FormatInt(v, 10)
}

func (g *litGen) double() string {
	x := (g.rng.Float64() - 0.5) * 1e6
	switch g.rng.IntN(4) {
	case 0:
		return strconv.FormatFloat(x, 'e', 3, 64) // scientific notation
	case 1:
		return strconv.Itoa(int(x)) // an integer literal for a double
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

func (g *litGen) uuid() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(g.rng.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// timestamp is a string with a zone, or milliseconds since the epoch.
func (g *litGen) timestamp() string {
	ms := baseMs + g.rng.Int64N(400*24*3600*1000)
	if g.rng.IntN(2) == 0 {
		return strconv.FormatInt(ms, 10)
	}
	return quote(time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000-0700"))
}

func (g *litGen) blob() string {
	b := make([]byte, g.rng.IntN(6))
	for i := range b {
		b[i] = byte(g.rng.UintN(256))
	}
	return "0x" + hex.EncodeToString(b)
}

func (g *litGen) list() string {
	var parts []string
	for i := g.rng.IntN(4); i > 0; i-- {
		parts = append(parts, quote(g.text()))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (g *litGen) set() string {
	var parts []string
	for i := 1 + g.rng.IntN(3); i > 0; i-- {
		parts = append(parts, strconv.Itoa(g.rng.IntN(2000)-1000))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// dict has distinct keys: of a literal map with a key twice, Cassandra keeps either value
// (even the same text prepared twice may keep the other one).
func (g *litGen) dict() string {
	var parts []string
	for _, key := range g.rng.Perm(5)[:1+g.rng.IntN(3)] {
		parts = append(parts, fmt.Sprintf("'%c': %d", 'a'+rune(key), g.rng.IntN(200)-100))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func (g *litGen) insertRow() litOp {
	return litOp{shape: "insert-row", text: fmt.Sprintf(
		"INSERT INTO lit_rows (k, c, name, big, id, at, score, flag, data, tags, labels, attrs) "+
			"VALUES (%d, %d, %s, %s, %s, %s, %s, %t, %s, %s, %s, %s)",
		g.k(), g.c(), quote(g.text()), g.bigint(), g.uuid(), g.timestamp(), g.double(),
		g.rng.IntN(2) == 0, g.blob(), g.list(), g.set(), g.dict())}
}

// insertBound has a marker of the client's own among the literals.
func (g *litGen) insertBound() litOp {
	return litOp{shape: "insert-bound", text: fmt.Sprintf(
		"INSERT INTO lit_rows (k, c, name, score) VALUES (%d, %d, ?, %s)", g.k(), g.c(), g.double()),
		args: []any{g.text()}}
}

func (g *litGen) update() litOp {
	return litOp{shape: "update", text: fmt.Sprintf(
		"UPDATE lit_rows SET name = %s, score = %s, labels = labels + %s WHERE k = %d AND c = %d",
		quote(g.text()), g.double(), g.set(), g.k(), g.c())}
}

func (g *litGen) deleteRow() litOp {
	return litOp{shape: "delete-row", text: fmt.Sprintf("DELETE FROM lit_rows WHERE k = %d AND c = %d", g.k(), g.c())}
}

func (g *litGen) deleteCells() litOp {
	return litOp{shape: "delete-cells", text: fmt.Sprintf("DELETE name, tags FROM lit_rows WHERE k = %d AND c = %d", g.k(), g.c())}
}

// lwt hits a small key range: some apply, the others return the row that is there.
func (g *litGen) lwt() litOp {
	return litOp{shape: "lwt", lwt: true, text: fmt.Sprintf(
		"INSERT INTO lit_lwt (k, v, n) VALUES (%d, %s, %s) IF NOT EXISTS", g.rng.IntN(20), quote(g.text()), g.bigint())}
}

// batch is a gocql batch whose children are formatted with literals; each child has a marker
// of its own too, which makes gocql prepare it (a child without arguments goes as text).
func (g *litGen) batch() litOp {
	var children []litOp
	for i := 2 + g.rng.IntN(2); i > 0; i-- {
		if g.rng.IntN(2) == 0 {
			children = append(children, litOp{shape: "batch-insert", text: fmt.Sprintf(
				"INSERT INTO lit_rows (k, c, name, big) VALUES (%d, %d, ?, %s)", g.k(), g.c(), g.bigint()),
				args: []any{g.text()}})
		} else {
			children = append(children, litOp{shape: "batch-update", text: fmt.Sprintf(
				"UPDATE lit_rows SET score = %s, flag = ? WHERE k = %d AND c = %d", g.double(), g.k(), g.c()),
				args: []any{g.rng.IntN(2) == 0}})
		}
	}
	return litOp{batch: children}
}

// textBatch is a BEGIN BATCH ... APPLY BATCH text, which gocql prepares as a whole.
func (g *litGen) textBatch() litOp {
	k := g.k()
	return litOp{shape: "text-batch", text: fmt.Sprintf(
		"BEGIN BATCH INSERT INTO lit_rows (k, c, name) VALUES (%d, %d, %s); "+
			"UPDATE lit_rows SET big = %s WHERE k = %d AND c = %d; APPLY BATCH",
		k, g.c(), quote(g.text()), g.bigint(), k, g.c())}
}

func (g *litGen) selectPartition() litOp {
	return litOp{shape: "select-partition", text: fmt.Sprintf("SELECT * FROM lit_rows WHERE k = %d", g.k())}
}

// selectFrom bounds the clustering key with a marker of the client's own.
func (g *litGen) selectFrom() litOp {
	return litOp{shape: "select-from", text: fmt.Sprintf(
		"SELECT k, c, name, big, tags FROM lit_rows WHERE k = %d AND c >= ?", g.k()), args: []any{g.c()}}
}

func (g *litGen) selectPoint() litOp {
	return litOp{shape: "select-point", text: fmt.Sprintf(
		"SELECT name, score, flag, id, at, data, labels, attrs FROM lit_rows WHERE k = %d AND c = %d", g.k(), g.c())}
}

// selectIn names the keyspace: its prepared id is md5 of the text alone.
func (g *litGen) selectIn() litOp {
	return litOp{shape: "select-in-qualified", text: fmt.Sprintf(
		"SELECT c, name, big FROM "+ksMark+".lit_rows WHERE k = %d AND c IN (%d, %d, %d)", g.k(), g.c(), g.c(), g.c())}
}

func (g *litGen) selectPaged() litOp {
	return litOp{shape: "select-paged", pageSize: literalPage, text: fmt.Sprintf(
		"SELECT k, c, name, big, score FROM lit_rows WHERE k = %d", g.k())}
}

// schemaChange reads partitions with statements gocql prepared before (it still holds their
// ids), adds a column, reads them again with those ids, writes the new column and reads it.
func (g *litGen) schemaChange() []litOp {
	var ops []litOp
	star := func() {
		for k := 0; k < 3; k++ {
			ops = append(ops, litOp{shape: "select-partition", text: fmt.Sprintf("SELECT * FROM lit_rows WHERE k = %d", k)})
		}
	}
	star()
	ops = append(ops, litOp{ddl: true, text: "ALTER TABLE lit_rows ADD extra text"})
	star()
	for i := 0; i < 6; i++ {
		ops = append(ops, litOp{shape: "insert-extra", text: fmt.Sprintf(
			"INSERT INTO lit_rows (k, c, extra) VALUES (%d, %d, %s)", g.rng.IntN(3), g.c(), quote(g.text()))})
	}
	star()
	for i := 0; i < 4; i++ {
		ops = append(ops, litOp{shape: "select-extra", text: fmt.Sprintf(
			"SELECT c, extra, name FROM lit_rows WHERE k = %d AND c >= %d", g.rng.IntN(3), g.c())})
	}
	return ops
}

// literalRun is what one run of the plan saw.
type literalRun struct {
	outcome
	applied, notApplied int // LWT outcomes
	pages               int // pages read by the paged SELECTs
}

// runLiteral runs the plan in keyspace ks with a session s in that keyspace.
func (run *literalRun) ops(r *recorder, ks string, ops []litOp, first int) {
	s := r.s
	text := func(op litOp) string { return strings.ReplaceAll(op.text, ksMark, ks) }
	for j, op := range ops {
		i := first + j
		switch {
		case op.ddl:
			if err := s.Query(text(op)).Exec(); err != nil {
				r.fail("#%d %s: %s", i, op.text, describe(err))
			} else {
				r.note("#%d %s → ok", i, op.text)
			}
		case op.batch != nil:
			b := s.Batch(gocql.LoggedBatch)
			for _, c := range op.batch {
				b.Query(text(c), c.args...)
			}
			if err := b.Exec(); err != nil {
				r.note("#%d batch of %d → %s", i, len(op.batch), describe(err))
			} else {
				r.note("#%d batch of %d → ok", i, len(op.batch))
			}
			for _, c := range op.batch {
				r.note("  %s %v", c.text, c.args)
			}
		case op.pageSize > 0:
			var state []byte
			var sizes []int
			for {
				iter := s.Query(text(op), op.args...).PageSize(op.pageSize).PageState(state).Iter()
				next := iter.PageState()
				set, err := readRows(iter)
				if err != nil {
					r.note("#%d %s, page %d → %s", i, op.text, len(sizes)+1, describe(err))
					break
				}
				sizes = append(sizes, len(set.rows))
				r.note("#%d %s, page %d → [%s]", i, op.text, len(sizes), set.header)
				for _, row := range set.rows {
					r.note("  %s", strings.Join(row, ", "))
				}
				if len(next) == 0 || len(sizes) > 100 {
					break
				}
				state = next
			}
			run.pages += len(sizes)
			r.note("#%d pages %v", i, sizes)
		default:
			set, err := readRows(s.Query(text(op), op.args...).Iter())
			if err != nil {
				r.note("#%d %s %v → %s", i, op.text, op.args, describe(err))
				continue
			}
			r.note("#%d %s %v → [%s] %d rows", i, op.text, op.args, set.header, len(set.rows))
			for _, row := range set.rows {
				r.note("  %s", strings.Join(row, ", "))
			}
			if op.lwt {
				switch {
				case len(set.names) == 0 || set.names[0] != "[applied]" || len(set.rows) != 1:
					r.fail("#%d %s: no [applied] row: [%s] %v", i, op.text, set.header, set.rows)
				case set.rows[0][0] == "bool true":
					run.applied++
				default:
					run.notApplied++
				}
			}
		}
	}
}

// finish reads both tables whole and ends the transcript.
func (run *literalRun) finish(r *recorder, ks string) {
	for _, t := range []string{"lit_rows", "lit_lwt"} {
		r.query("SELECT * FROM "+t, r.s.Query("SELECT * FROM "+t))
	}
	r.note("LWT applied %d, not applied %d; %d pages", run.applied, run.notApplied, run.pages)
	// The keyspace's name differs between the runs: a server message naming it should not.
	for i, line := range r.out.transcript {
		r.out.transcript[i] = strings.ReplaceAll(line, ks, ksMark)
	}
	run.outcome = r.out
}

// preparedTexts lists the distinct statement texts the server holds prepared for keyspace ks
// and the workload's tables: system.prepared_statements, which Cassandra writes for every
// statement it prepares and clears of a table's statements when the table is dropped. A text
// without a keyspace is stored twice (with the connection's keyspace and with none): the row
// with keyspace ks counts; a text that names ks counts whatever its row's keyspace.
// (system_views.cql_metrics' prepared_statements_count counts the server's whole cache, both
// rows of a text and every other client's statements.)
func preparedTexts(s *gocql.Session, ks string) (map[string]bool, error) {
	iter := s.Query("SELECT logged_keyspace, query_string FROM system.prepared_statements").PageSize(5000).Iter()
	out := map[string]bool{}
	var logged, text string
	for iter.Scan(&logged, &text) {
		if workloadText(ks, logged, text) {
			out[text] = true
		}
	}
	return out, iter.Close()
}

// qualifiedTable finds a keyspace-qualified name of the workload's tables.
var qualifiedTable = regexp.MustCompile(`([A-Za-z0-9_]+)\.lit_(?:rows|lwt)\b`)

// workloadText tells whether a row of system.prepared_statements is this workload's in ks.
func workloadText(ks, logged, text string) bool {
	if m := qualifiedTable.FindStringSubmatch(text); m != nil {
		return m[1] == ks
	}
	return logged == ks && (strings.Contains(text, "lit_rows") || strings.Contains(text, "lit_lwt"))
}

// cacheCounts are the server's prepared_statements_count and prepared_statements_evicted
// (system_views.cql_metrics).
func cacheCounts(s *gocql.Session) (count, evicted float64, err error) {
	iter := s.Query("SELECT name, value FROM system_views.cql_metrics").Iter()
	var n string
	var v float64
	for iter.Scan(&n, &v) {
		switch n {
		case "prepared_statements_count":
			count = v
		case "prepared_statements_evicted":
			evicted = v
		}
	}
	return count, evicted, iter.Close()
}

// literalResult is one run of the literal workload with the server's prepared statements
// before and after.
type literalResult struct {
	ks           string
	run          literalRun
	added        int     // workload texts the server newly holds prepared
	cacheGrowth  float64 // growth of the server's prepared_statements_count
	evicted      float64 // statements the server evicted from its cache meanwhile
	seconds      float64
	setupProblem error
}

// literalPhase creates ks's tables through open, then runs the plan in ks, counting the
// server's prepared statements (on server, a session to the node itself) around it.
func literalPhase(open func(ks string) (*gocql.Session, error), server *gocql.Session, ks string, plan litPlan) literalResult {
	res := literalResult{ks: ks}
	t0 := time.Now()
	setup, err := open("")
	if err != nil {
		res.setupProblem = err
		return res
	}
	for _, stmt := range literalSchema(ks) {
		if err := setup.Query(stmt).Exec(); err != nil {
			setup.Close()
			res.setupProblem = fmt.Errorf("%s: %s", stmt, describe(err))
			return res
		}
	}
	setup.Close()
	s, err := open(ks)
	if err != nil {
		res.setupProblem = err
		return res
	}
	defer s.Close()
	r := &recorder{s: s}
	// The count covers plan.ops; the schema change after them drops the table's prepared
	// statements on the server.
	err = func() error {
		before, err := preparedTexts(server, ks)
		if err != nil {
			return err
		}
		c0, e0, err := cacheCounts(server)
		if err != nil {
			return err
		}
		res.run.ops(r, ks, plan.ops, 0)
		after, err := preparedTexts(server, ks)
		if err != nil {
			return err
		}
		for t := range after {
			if !before[t] {
				res.added++
			}
		}
		c1, e1, err := cacheCounts(server)
		res.cacheGrowth, res.evicted = c1-c0, e1-e0
		return err
	}()
	if err != nil {
		res.setupProblem = fmt.Errorf("reading the server's prepared statements: %s", describe(err))
	}
	res.run.ops(r, ks, plan.after, len(plan.ops))
	res.run.finish(r, ks)
	res.seconds = time.Since(t0).Seconds()
	return res
}

// literalPrepares runs the literal-PREPARE workload through autoprep and directly, on the
// protocol version gocql negotiates (v5 with Cassandra 5) and on v4, which has no result
// metadata id: there a client learns of a changed table only from UNPREPARED and the PREPARED
// answer that follows. It compares the runs and checks what each added to the server's
// prepared statements. It returns the problems found.
func literalPrepares(cfg config) []string {
	var problems []string
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		fmt.Printf("  FAILED %s\n", msg)
		problems = append(problems, "literal PREPAREs: "+msg)
	}
	plan := literalPlan(literalSeed)
	statements := 0
	for _, op := range plan.ops {
		statements += max(1, len(op.batch))
	}
	fmt.Printf("%s literal PREPAREs (seed %d): %d statements, %d distinct texts, %d shapes (%s)\n",
		name, literalSeed, statements, plan.texts, len(plan.shapes), strings.Join(plan.shapes, ", "))

	// The server's own view, read on a session of its own to the node.
	serverAddr := cfg.upstream
	if serverAddr == "" {
		serverAddr = cfg.target // no direct control: the system tables through autoprep
	}
	server, err := connect(serverAddr, "")
	if err != nil {
		fail("%v", err)
		return problems
	}
	defer server.Close()
	for _, proto := range []int{0, 4} {
		literalProtocol(cfg, server, plan, proto, fail)
	}
	return problems
}

// literalProtocol runs the workload on protocol version proto (0: negotiated).
func literalProtocol(cfg config, server *gocql.Session, plan litPlan, proto int, failed func(string, ...any)) {
	ks, version := literalKeyspace, "negotiated protocol"
	if proto != 0 {
		ks, version = fmt.Sprintf("%s_v%d", literalKeyspace, proto), fmt.Sprintf("protocol v%d", proto)
	}
	fail := func(format string, args ...any) { failed(version+": "+format, args...) }
	before, err := scrape(cfg.admin)
	if err != nil {
		fail("%v", err)
		return
	}
	proxied := literalPhase(func(ks string) (*gocql.Session, error) { return connectProto(cfg.target, ks, proto) },
		server, ks, plan)
	after, err := scrape(cfg.admin)
	if err != nil {
		fail("%v", err)
		return
	}
	file := strings.TrimPrefix(ks, "drivers_go_")
	save(cfg, file+"-proxied", proxied.run.transcript)
	report := func(how string, res literalResult) {
		fmt.Printf("  %s, %s (keyspace %s): %.1f s, %d observations, LWT applied %d / not %d, %d pages; the "+
			"server's prepared statements of the workload +%d (system.prepared_statements), its whole cache "+
			"+%g, evicted +%g (system_views.cql_metrics)\n", version, how, res.ks, res.seconds,
			len(res.run.transcript), res.run.applied, res.run.notApplied, res.run.pages, res.added, res.cacheGrowth,
			res.evicted)
		if res.setupProblem != nil {
			fail("%s: %v", how, res.setupProblem)
		}
		for _, f := range res.run.failures {
			fail("%s: %s", how, f)
		}
	}
	report("through autoprep", proxied)

	// What autoprep says it did with the PREPAREs.
	var answered float64
	var series []string
	for k, v := range after {
		if strings.HasPrefix(k, "autoprep_literal_prepares_total{") {
			d := v - before[k]
			if strings.Contains(k, `outcome="answered"`) {
				answered += d
			}
			if d != 0 {
				series = append(series, fmt.Sprintf("%s +%g", strings.TrimPrefix(k, "autoprep_literal_prepares_total"), d))
			}
		}
	}
	sort.Strings(series)
	fmt.Printf("  %s, autoprep_literal_prepares_total during the run: %s\n", version, orNone(series))
	if answered <= 0 {
		fail("autoprep answered no literal PREPARE from a shape: autoprep_literal_prepares_total{outcome=\"answered\"} "+
			"did not grow (%s). Is --prepare-literals on, and does this autoprep have issue 17?", orNone(series))
	}
	if allowed := 2*len(plan.shapes) + literalSlack; proxied.setupProblem == nil && proxied.added > allowed {
		fail("through autoprep the server now holds %d more prepared texts of the workload, for %d shapes "+
			"(at most %d allowed: 2 a shape + %d) and %d distinct texts: the server's prepared statements grew "+
			"with the statements, not the shapes", proxied.added, len(plan.shapes), allowed, literalSlack, plan.texts)
	}

	if cfg.upstream == "" {
		fmt.Printf("  %s, directly: skipped (AUTOPREP_DRIVER_UPSTREAM is not set)\n", version)
		return
	}
	direct := literalPhase(func(ks string) (*gocql.Session, error) { return connectProto(cfg.upstream, ks, proto) },
		server, ks+"_direct", plan)
	save(cfg, file+"-direct", direct.run.transcript)
	report("directly", direct)
	// The control shows that the count sees what gocql prepares: every distinct text (half, in
	// case a full server cache evicted some meanwhile).
	if direct.setupProblem == nil && direct.added < plan.texts/2 {
		fail("directly the server holds only %d more prepared texts of the workload for %d distinct texts "+
			"(evicted meanwhile: %g): the count does not see gocql's PREPAREs", direct.added, plan.texts, direct.evicted)
	}
	if proxied.run.applied == 0 || proxied.run.notApplied == 0 || proxied.run.pages <= 6 {
		fail("the workload lacks variety: LWT applied %d, not applied %d, %d pages",
			proxied.run.applied, proxied.run.notApplied, proxied.run.pages)
	}
	diffs := differences(proxied.run.transcript, direct.run.transcript)
	if len(diffs) == 0 {
		fmt.Printf("  %s, through autoprep and directly: identical transcripts\n", version)
	} else {
		for i, d := range diffs {
			if i == 20 {
				break
			}
			fmt.Println(d)
		}
		fail("%d differences between the transcripts through autoprep and directly (go-%s-*.txt)", len(diffs), file)
	}
	// The direct run's tables go: their prepared statements with them.
	if err := server.Query("DROP KEYSPACE IF EXISTS " + ks + "_direct").Exec(); err != nil {
		fmt.Printf("  dropping %s_direct: %s\n", ks, describe(err))
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no sample moved"
	}
	return strings.Join(s, ", ")
}

// typeNames are the CQL names of the native types, by protocol option id.
var typeNames = map[gocql.Type]string{
	gocql.TypeAscii: "ascii", gocql.TypeBigInt: "bigint", gocql.TypeBlob: "blob",
	gocql.TypeBoolean: "boolean", gocql.TypeCounter: "counter", gocql.TypeDecimal: "decimal",
	gocql.TypeDouble: "double", gocql.TypeFloat: "float", gocql.TypeInt: "int",
	gocql.TypeTimestamp: "timestamp", gocql.TypeUUID: "uuid", gocql.TypeVarchar: "text",
	gocql.TypeVarint: "varint", gocql.TypeTimeUUID: "timeuuid", gocql.TypeInet: "inet",
	gocql.TypeDate: "date", gocql.TypeTime: "time", gocql.TypeSmallInt: "smallint",
	gocql.TypeTinyInt: "tinyint", gocql.TypeDuration: "duration",
}

// typeName writes a column's CQL type (gocql's TypeInfo has no readable form of its own).
func typeName(t gocql.TypeInfo) string {
	if c, ok := t.(gocql.CollectionType); ok {
		switch c.Type() {
		case gocql.TypeMap:
			return "map<" + typeName(c.Key) + ", " + typeName(c.Elem) + ">"
		case gocql.TypeList:
			return "list<" + typeName(c.Elem) + ">"
		case gocql.TypeSet:
			return "set<" + typeName(c.Elem) + ">"
		}
	}
	if n, ok := typeNames[t.Type()]; ok {
		return n
	}
	return fmt.Sprintf("type 0x%04x %v", int(t.Type()), t)
}
