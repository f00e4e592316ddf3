package main

import (
	"regexp"
	"strings"
	"testing"
)

// The plan is the same for the same seed, draws many distinct texts of a dozen shapes, and
// every statement carries literals.
func TestLiteralPlan(t *testing.T) {
	a, b := literalPlan(literalSeed), literalPlan(literalSeed)
	if len(a.ops) != len(b.ops) {
		t.Fatalf("two plans of one seed differ in length: %d, %d", len(a.ops), len(b.ops))
	}
	for i := range a.ops {
		if a.ops[i].text != b.ops[i].text {
			t.Fatalf("two plans of one seed differ at #%d: %q, %q", i, a.ops[i].text, b.ops[i].text)
		}
	}
	if len(a.shapes) < 10 || len(a.shapes) > 20 {
		t.Errorf("%d shapes: %v", len(a.shapes), a.shapes)
	}
	if a.texts < 200 {
		t.Errorf("only %d distinct texts", a.texts)
	}
	digit := regexp.MustCompile(`[0-9]`)
	batches := 0
	for _, op := range a.ops {
		stmts := []litOp{op}
		if op.batch != nil {
			batches++
			stmts = op.batch
		}
		for _, s := range stmts {
			if !digit.MatchString(s.text) {
				t.Errorf("no literal in %q", s.text)
			}
			if markers := strings.Count(s.text, "?"); markers != len(s.args) {
				t.Errorf("%q: %d markers, %d values", s.text, markers, len(s.args))
			}
			if op.batch != nil && len(s.args) == 0 {
				t.Errorf("batch child %q has no value: gocql would send it as text", s.text)
			}
		}
	}
	if batches == 0 {
		t.Errorf("no batch")
	}
}

func TestWorkloadText(t *testing.T) {
	ks := "drivers_go_literal"
	for _, tc := range []struct {
		logged, text string
		want         bool
	}{
		{ks, "SELECT * FROM lit_rows WHERE k = 1", true},
		{"", "SELECT * FROM lit_rows WHERE k = 1", false}, // the same text's row without keyspace
		{ks + "_direct", "SELECT * FROM lit_rows WHERE k = 1", false},
		{"", "SELECT c FROM " + ks + ".lit_rows WHERE k = 1", true},
		{ks, "SELECT c FROM " + ks + "_direct.lit_rows WHERE k = 1", false},
		{ks, "SELECT * FROM items WHERE k = 1", false},
	} {
		if got := workloadText(ks, tc.logged, tc.text); got != tc.want {
			t.Errorf("workloadText(%q, %q) = %v, want %v", tc.logged, tc.text, got, tc.want)
		}
	}
}
