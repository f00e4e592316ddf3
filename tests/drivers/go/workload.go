// The driver matrix's legacy workload, for gocql: the statements a legacy application sends,
// with results checked against exact expected values.
//
// The same workload runs through autoprep and directly against the server; each run yields a
// transcript (every result set with its column metadata, page sizes and every error with its
// server message), and the two transcripts must be identical: that is transparency.
//
// Steps: setup (keyspace, table; then a session with the keyspace, so every connection sends
// USE); 100 INSERTs written with literals covering text (quotes, non-ASCII, ';' and comment
// markers), int, bigint (negative), double (scientific notation), uuid, timestamp (string with
// zone and integer), list (empty = null), map and blob (empty); SELECTs with WHERE literals
// (paged 10 at a time over 100 rows, by gocql's pager and page by page; ranges, IN, points);
// INSERT and paged SELECT with bound values; a BEGIN BATCH ... APPLY BATCH text and a gocql
// batch of argument-less statements; ALTER TABLE ... ADD between runs of the same SELECT *;
// statements the server rejects.
//
// gocql prepares every SELECT/INSERT/UPDATE/DELETE/BATCH statement it is given, literals or
// not (conn.go: shouldPrepare): a legacy gocql application sends PREPARE + EXECUTE per distinct
// text, never a literal-bearing QUERY. Its only unprepared DML is the children of a batch
// built without arguments, which autoprep rewrites; the rest of the workload checks that
// autoprep passes gocql's PREPAREs, EXECUTEs, paging and errors through untouched.

package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// keyspace of this driver's workload (dropped and created again by every run).
const keyspace = "drivers_go"

const (
	// baseMs is 2026-01-02 03:00:05 UTC in milliseconds since the epoch.
	baseMs = int64(1_767_322_805_000)
	// rows of partition 1, written by INSERTs with literals.
	rows = 100
	// preparedRows of partition 2, written by an INSERT with bound values.
	preparedRows = 20
	// batchRounds of the gocql batch API: enough for autoprep to prepare the children's
	// shapes (its default admission threshold is 2) and rewrite the later rounds.
	batchRounds = 8
	// columns every full-row SELECT names, in table order.
	columns = "k, c, name, big, score, id, at, tags, attrs, data"
)

// outcome is what one run of the workload saw.
type outcome struct {
	transcript []string // every observation, in order
	failures   []string // observations that differ from the expected values
}

// rowSet is a result set: column names, the header (names and types) and the rendered rows.
type rowSet struct {
	names  []string
	header string
	rows   [][]string
}

type recorder struct {
	s   *gocql.Session
	out outcome
}

// runWorkload runs the whole workload. open gives a session, with keyspace ks when ks is not
// empty. It returns the session of the main part, still open, for the caller's checks.
func runWorkload(open func(ks string) (*gocql.Session, error)) (outcome, *gocql.Session) {
	r := &recorder{}
	setup, err := open("")
	if err != nil {
		r.fail("connecting: %v", err)
		return r.out, nil
	}
	r.s = setup
	ok := r.exec("DROP KEYSPACE IF EXISTS "+keyspace) &&
		r.exec("CREATE KEYSPACE "+keyspace+" WITH replication = "+
			"{'class': 'SimpleStrategy', 'replication_factor': 1}") &&
		r.exec("CREATE TABLE "+keyspace+".items (k int, c int, name text, big bigint, "+
			"score double, id uuid, at timestamp, tags list<text>, "+
			"attrs map<text, int>, data blob, PRIMARY KEY (k, c))")
	setup.Close()
	if !ok {
		return r.out, nil
	}
	s, err := open(keyspace)
	if err != nil {
		r.fail("connecting with keyspace %s: %v", keyspace, err)
		return r.out, nil
	}
	r.s = s
	r.note("session with keyspace %s → ok", keyspace)
	r.literalInserts()
	r.literalSelects()
	r.boundValues()
	r.batches()
	r.schemaChange()
	r.errors()
	return r.out, s
}

func (r *recorder) note(format string, args ...any) {
	r.out.transcript = append(r.out.transcript, fmt.Sprintf(format, args...))
}

func (r *recorder) fail(format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	r.out.transcript = append(r.out.transcript, "FAILED "+what)
	r.out.failures = append(r.out.failures, what)
}

// expect compares rendered rows.
func (r *recorder) expect(what string, got, want [][]string) {
	if !reflect.DeepEqual(got, want) {
		r.fail("%s:\n      got  %v\n      want %v", what, got, want)
	}
}

// exec runs a statement without rows (DDL, DML) that must succeed.
func (r *recorder) exec(stmt string) bool {
	if err := r.s.Query(stmt).Exec(); err != nil {
		r.fail("%s: %s", stmt, describe(err))
		return false
	}
	r.note("%s → ok", stmt)
	return true
}

// query runs a SELECT (every page, pageSize rows at a time when > 0) and notes its rows.
func (r *recorder) query(what string, q *gocql.Query) (rowSet, bool) {
	set, err := readRows(q.Iter())
	if err != nil {
		r.fail("%s: %s", what, describe(err))
		return set, false
	}
	r.note("%s → [%s] %d rows", what, set.header, len(set.rows))
	for _, row := range set.rows {
		r.note("  %s", strings.Join(row, ", "))
	}
	return set, true
}

func (r *recorder) literalInserts() {
	for c := 0; c < rows; c++ {
		stmt := insertLiteral(1, c)
		if err := r.s.Query(stmt).Exec(); err != nil {
			r.fail("%s: %s", stmt, describe(err))
			return
		}
	}
	r.note("%d INSERTs with literals → ok", rows)
}

func (r *recorder) literalSelects() {
	all := "SELECT " + columns + " FROM items WHERE k = 1"
	want := expectedRows(1, intRange(0, rows))

	// gocql's pager, 10 rows a page.
	if set, ok := r.query("pager over "+all, r.s.Query(all).PageSize(10)); ok {
		r.expect("rows by the pager (page size 10)", set.rows, want)
	}

	// Page by page: the page sizes and the paging state's round trips.
	var state []byte
	var sizes []int
	var got [][]string
	for {
		iter := r.s.Query(all).PageSize(10).PageState(state).Iter()
		next := iter.PageState()
		set, err := readRows(iter)
		if err != nil {
			r.fail("page %d of %s: %s", len(sizes)+1, all, describe(err))
			return
		}
		sizes = append(sizes, len(set.rows))
		got = append(got, set.rows...)
		if len(next) == 0 {
			break
		}
		state = next
		if len(sizes) > 2*rows {
			r.fail("%s: paging does not end", all)
			return
		}
	}
	r.note("pages of %s: %v", all, sizes)
	r.expect("rows page by page (page size 10)", got, want)
	for _, n := range sizes {
		if n > 10 {
			r.fail("a page holds more than 10 rows: %v", sizes)
			break
		}
	}

	cases := []struct {
		stmt string
		cs   []int
	}{
		{all + " AND c >= 20 AND c < 30", intRange(20, 30)},
		{all + " AND c >= 40 AND c < 45", intRange(40, 45)},
		{all + " AND c IN (3, 5, 7)", []int{3, 5, 7}},
		{all + " AND c IN (11, 97)", []int{11, 97}},
		{all + " AND c = 42", []int{42}},
		{all + " AND c = 43", []int{43}},
		{all + " AND c = 44", []int{44}},
		{all + " AND c = 1000", nil},
	}
	for _, tc := range cases {
		if set, ok := r.query(tc.stmt, r.s.Query(tc.stmt)); ok {
			r.expect(tc.stmt, set.rows, expectedRows(1, tc.cs))
		}
	}
}

func (r *recorder) boundValues() {
	insert := "INSERT INTO items (" + columns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	for c := 0; c < preparedRows; c++ {
		if err := r.s.Query(insert, expectedValues(2, c)...).Exec(); err != nil {
			r.fail("%s with c=%d: %s", insert, c, describe(err))
			return
		}
	}
	r.note("%d INSERTs with bound values → ok", preparedRows)
	sel := "SELECT " + columns + " FROM items WHERE k = ?"
	if set, ok := r.query(sel+" (k = 2), paged by 10", r.s.Query(sel, 2).PageSize(10)); ok {
		r.expect(sel+" (k = 2)", set.rows, expectedRows(2, intRange(0, preparedRows)))
	}
}

func (r *recorder) batches() {
	for b := 0; b < 3; b++ {
		stmt := fmt.Sprintf("BEGIN BATCH INSERT INTO items (k, c, name, big) VALUES (3, %d, 'batch-%d', %d); "+
			"UPDATE items SET score = %d.5 WHERE k = 3 AND c = %d; APPLY BATCH", b, b, b*100, b, b)
		if !r.exec(stmt) {
			return
		}
	}
	small := "SELECT k, c, name, big, score, tags FROM items WHERE k = "
	if set, ok := r.query(small+"3", r.s.Query(small+"3")); ok {
		var want [][]string
		for b := 0; b < 3; b++ {
			want = append(want, renderRow([]any{3, b, fmt.Sprintf("batch-%d", b), int64(b * 100), float64(b) + 0.5, nil}))
		}
		r.expect("rows written by BEGIN BATCH ... APPLY BATCH", set.rows, want)
	}

	for b := 0; b < batchRounds; b++ {
		batch := r.s.Batch(gocql.LoggedBatch)
		batch.Query(fmt.Sprintf("INSERT INTO items (k, c, name) VALUES (4, %d, 'api-%d')", b, b))
		batch.Query(fmt.Sprintf("UPDATE items SET big = %d WHERE k = 4 AND c = %d", b*7, b))
		batch.Query(fmt.Sprintf("INSERT INTO items (k, c, tags) VALUES (4, %d, ['q%d'])", b+100, b))
		if err := batch.Exec(); err != nil {
			r.fail("gocql batch round %d: %s", b, describe(err))
			return
		}
		r.note("gocql batch of 3 argument-less statements, round %d → ok", b)
	}
	if set, ok := r.query(small+"4", r.s.Query(small+"4")); ok {
		var want [][]string
		for b := 0; b < batchRounds; b++ {
			want = append(want, renderRow([]any{4, b, fmt.Sprintf("api-%d", b), int64(b * 7), nil, nil}))
		}
		for b := 0; b < batchRounds; b++ {
			want = append(want, renderRow([]any{4, b + 100, nil, nil, nil, []string{fmt.Sprintf("q%d", b)}}))
		}
		r.expect("rows written by the gocql batch", set.rows, want)
	}
}

func (r *recorder) schemaChange() {
	names := strings.Split(columns, ", ")
	// SELECT * lists the key columns, then the others in alphabetical order.
	before := []string{"k", "c", "at", "attrs", "big", "data", "id", "name", "score", "tags"}
	after := []string{"k", "c", "at", "attrs", "big", "data", "extra", "id", "name", "score", "tags"}
	byName := func(c int, extra any, order []string) [][]string {
		values := expectedValues(1, c)
		row := make([]any, len(order))
		for i, col := range order {
			row[i] = extra
			for j, n := range names {
				if n == col {
					row[i] = values[j]
				}
			}
		}
		return [][]string{renderRow(row)}
	}
	star := func(c int) string { return fmt.Sprintf("SELECT * FROM items WHERE k = 1 AND c = %d", c) }

	for _, c := range []int{5, 6, 7} {
		if set, ok := r.query(star(c), r.s.Query(star(c))); ok {
			if !reflect.DeepEqual(set.names, before) {
				r.fail("%s: columns %v, want %v", star(c), set.names, before)
			}
			r.expect(star(c), set.rows, byName(c, nil, before))
		}
	}
	if !r.exec("ALTER TABLE items ADD extra text") {
		return
	}
	// c = 5 again: the very statement that ran before the ALTER.
	for _, c := range []int{5, 8, 9} {
		if set, ok := r.query(star(c), r.s.Query(star(c))); ok {
			if !reflect.DeepEqual(set.names, after) {
				r.fail("%s after ALTER: columns %v, want %v", star(c), set.names, after)
			}
			r.expect(star(c)+" after ALTER", set.rows, byName(c, nil, after))
		}
	}
	for c := 11; c < 15; c++ {
		if !r.exec(fmt.Sprintf("UPDATE items SET extra = 'extra-%d' WHERE k = 1 AND c = %d", c, c)) {
			return
		}
	}
	if set, ok := r.query(star(12), r.s.Query(star(12))); ok {
		r.expect(star(12), set.rows, byName(12, "extra-12", after))
	}
}

func (r *recorder) errors() {
	// Each statement with the server error code it must get (its message is compared with the
	// direct run's through the transcript).
	cases := []struct {
		stmt string
		code int
	}{
		{"SELEC * FROM items", gocql.ErrCodeSyntax},
		{"INSERT INTO items (k, c, name) VALUES (1, 'x', 'y')", gocql.ErrCodeInvalid},
		{"SELECT * FROM nosuch WHERE k = 1", gocql.ErrCodeInvalid},
		{"SELECT * FROM items WHERE k = 1 AND name = 'x'", gocql.ErrCodeInvalid},
		{"INSERT INTO items (k, c, big) VALUES (1, 2, 99999999999999999999)", gocql.ErrCodeInvalid},
	}
	for _, tc := range cases {
		for i := 0; i < 3; i++ {
			err := r.s.Query(tc.stmt).Exec()
			if err == nil {
				r.fail("%s: succeeded, want server error 0x%04x", tc.stmt, tc.code)
				continue
			}
			r.note("%s → %s", tc.stmt, describe(err))
			var re gocql.RequestError
			if !errors.As(err, &re) || re.Code() != tc.code {
				r.fail("%s: want server error 0x%04x, got %s", tc.stmt, tc.code, describe(err))
			}
		}
	}
}

// insertLiteral is the INSERT of row (k, c) with every value written as a literal.
func insertLiteral(k, c int) string {
	score := strconv.FormatFloat(scoreOf(c), 'f', -1, 64)
	if c == 50 {
		score = "5475e-2" // 54.75 in scientific notation
	}
	at := strconv.FormatInt(atMs(c), 10)
	if c%2 == 0 {
		at = fmt.Sprintf("'2026-01-02 %02d:%02d:05+0000'", 3+c/60, c%60)
	}
	tags := "[]"
	if c%10 != 0 {
		tags = fmt.Sprintf("['t%d', 'x']", c)
	}
	return fmt.Sprintf("INSERT INTO items (%s) VALUES (%d, %d, '%s', %d, %s, %s, %s, %s, {'a': %d, 'b': %d}, 0x%s)",
		columns, k, c, strings.ReplaceAll(nameOf(c), "'", "''"), bigOf(c), score, idOf(c), at, tags,
		c, -c, hex.EncodeToString(blobOf(c)))
}

// expectedValues is row (k, c) as Go values (nil for null), in the order of columns.
func expectedValues(k, c int) []any {
	var tags any // an empty collection is no collection: the server returns null
	if c%10 != 0 {
		tags = []string{fmt.Sprintf("t%d", c), "x"}
	}
	return []any{k, c, nameOf(c), bigOf(c), scoreOf(c), idOf(c), time.UnixMilli(atMs(c)).UTC(), tags,
		map[string]int{"a": c, "b": -c}, blobOf(c)}
}

func expectedRows(k int, cs []int) [][]string {
	var out [][]string
	for _, c := range cs {
		out = append(out, renderRow(expectedValues(k, c)))
	}
	return out
}

func nameOf(c int) string {
	switch c % 10 {
	case 3:
		return fmt.Sprintf("it's ünïcödé ✓ %d", c)
	case 4:
		return fmt.Sprintf("x; -- /* %d */ y", c)
	}
	return fmt.Sprintf("name-%d", c)
}

func bigOf(c int) int64 {
	v := int64(c) * 1_000_000_007
	if c%2 == 1 {
		return -v
	}
	return v
}

func scoreOf(c int) float64 { return float64(c)*1.5 - 20.25 }

func idOf(c int) gocql.UUID {
	id, err := gocql.ParseUUID(fmt.Sprintf("00000000-0000-4000-8000-%012x", c))
	if err != nil {
		panic(err) // a constant format: cannot happen
	}
	return id
}

func atMs(c int) int64 { return baseMs + int64(c)*60_000 }

func blobOf(c int) []byte {
	if c%10 == 7 {
		return []byte{}
	}
	return []byte{byte(c), 0xff, 0x00, 0xab}
}

func intRange(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// readRows reads every row of iter, each cell rendered; a null cell is "null".
func readRows(iter *gocql.Iter) (rowSet, error) {
	cols := iter.Columns()
	var set rowSet
	var header []string
	for _, c := range cols {
		set.names = append(set.names, c.Name)
		header = append(header, c.Name+" "+typeName(c.TypeInfo))
	}
	set.header = strings.Join(header, ", ")
	for {
		// Scanning into **T leaves the *T nil for a null cell.
		dests := make([]any, len(cols))
		for i, c := range cols {
			dests[i] = reflect.New(reflect.PointerTo(reflect.TypeOf(c.TypeInfo.Zero()))).Interface()
		}
		if !iter.Scan(dests...) {
			break
		}
		row := make([]any, len(cols))
		for i, d := range dests {
			if p := reflect.ValueOf(d).Elem(); !p.IsNil() {
				row[i] = p.Elem().Interface()
			}
		}
		set.rows = append(set.rows, renderRow(row))
	}
	return set, iter.Close()
}

func renderRow(values []any) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = render(v)
	}
	return out
}

// render writes a cell's value so that equal values of the same CQL type read the same.
func render(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case []byte:
		return "0x" + hex.EncodeToString(x)
	case float64:
		return "double " + strconv.FormatFloat(x, 'g', -1, 64)
	case time.Time:
		return "timestamp " + x.UTC().Format("2006-01-02T15:04:05.000Z")
	case gocql.UUID:
		return "uuid " + x.String()
	case []string:
		return fmt.Sprintf("list%q", x)
	}
	return fmt.Sprintf("%T %v", v, v)
}

// describe gives a server error as its code and message, anything else as gocql's words.
func describe(err error) string {
	var re gocql.RequestError
	if errors.As(err, &re) {
		return fmt.Sprintf("server error 0x%04x: %s", re.Code(), re.Message())
	}
	return "driver error: " + err.Error()
}
