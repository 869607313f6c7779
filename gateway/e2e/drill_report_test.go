package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// drillOrder is the order of the drills in docs/RELIABILITY.md's table.
var drillOrder = []string{
	"redis-kill", "redis-slow", "redis-partition", "fleet-outage", "postgres-kill", "postgres-partition",
	"upstream-5xx", "upstream-timeout", "upstream-slow-first-byte", "upstream-stall", "upstream-stream-cut", "upstream-garbage-sse",
	"upstream-5xx-failover", "upstream-timeout-failover",
	"client-disconnect", "sigterm-open-streams", "replica-sigkill", "calllog-wal-disk", "calllog-spool-disk",
	"plugin-trap", "plugin-loop", "plugin-membomb", "plugin-wildptr",
	"hot-reload",
}

// drillResult is one row of the table: measured, never written by hand.
type drillResult struct {
	id       string // one of drillOrder
	fault    string // what was injected
	load     string // the load during it
	happened string // what the gateway did, as measured
	lost     string // what was lost: "nothing", or what
	ledger   string // what the ledger holds, the evidence for lost
	run      string // the -run pattern that reruns it
}

// Markers around the table in docs/RELIABILITY.md.
const (
	drillTableBegin = "<!-- drills:begin (written by TOLLGATE_DRILLS=long; edit the prose outside) -->"
	drillTableEnd   = "<!-- drills:end -->"
)

var drillReportMu sync.Mutex

// report logs a drill's row and, in the long form and if the drill
// passed, writes it into docs/RELIABILITY.md.
func report(t *testing.T, r drillResult) {
	t.Helper()
	t.Logf("DRILL %s | fault: %s | load: %s | happened: %s | lost: %s (%s)", r.id, r.fault, r.load, r.happened, r.lost, r.ledger)
	if !drillLong || t.Failed() {
		return
	}
	drillReportMu.Lock()
	defer drillReportMu.Unlock()
	path := filepath.Join(repoRoot(t), "docs", "RELIABILITY.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("writing the drill's row: %v", err)
	}
	out, err := withDrillRow(string(doc), r, time.Now().UTC())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// withDrillRow returns doc with r's row in the table between the markers
// (replacing the drill's earlier row), rows in drillOrder.
func withDrillRow(doc string, r drillResult, now time.Time) (string, error) {
	before, rest, ok := strings.Cut(doc, drillTableBegin)
	if !ok {
		return "", fmt.Errorf("no %q marker", drillTableBegin)
	}
	table, after, ok := strings.Cut(rest, drillTableEnd)
	if !ok {
		return "", fmt.Errorf("no %q marker", drillTableEnd)
	}
	rows := map[string]string{}
	var unknown []string
	for _, line := range strings.Split(table, "\n") {
		id, ok := drillRowID(line)
		if !ok {
			continue
		}
		if _, known := rows[id]; !known && !slices.Contains(drillOrder, id) {
			unknown = append(unknown, id)
		}
		rows[id] = line
	}
	cell := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
	lost := "**" + cell(r.lost) + "**"
	if r.ledger != "" {
		lost += ": " + cell(r.ledger)
	}
	rows[r.id] = fmt.Sprintf("| `%s` | %s | %s | %s | %s | `TOLLGATE_DRILLS=long go test -count=1 -run '%s' ./gateway/e2e/` (%s) |",
		r.id, cell(r.fault), cell(r.load), cell(r.happened), lost, r.run, now.Format("2006-01-02"))
	var b strings.Builder
	b.WriteString(before)
	b.WriteString(drillTableBegin)
	b.WriteString("\n| drill | fault injected | load during it | what happened | lost | rerun (last measured) |\n|---|---|---|---|---|---|\n")
	for _, id := range append(append([]string(nil), drillOrder...), unknown...) {
		if line, ok := rows[id]; ok {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	b.WriteString(drillTableEnd)
	b.WriteString(after)
	return b.String(), nil
}

// drillRowID returns the drill id of a table row: "| `id` | ...".
func drillRowID(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "| `")
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, "`")
	return id, ok && id != ""
}

func TestDrillReportTable(t *testing.T) {
	doc := "# R\n\nprose\n\n" + drillTableBegin + "\n" + drillTableEnd + "\n\nmore prose\n"
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var err error
	for _, r := range []drillResult{
		{id: "hot-reload", fault: "f1", load: "l1", happened: "a | b", lost: "nothing", run: "^TestDrillHotReload$"},
		{id: "redis-kill", fault: "f2", load: "l2", happened: "h2", lost: "nothing", ledger: "3 rows", run: "^TestDrillRedisKill$"},
		{id: "hot-reload", fault: "f3", load: "l3", happened: "h3", lost: "nothing", run: "^TestDrillHotReload$"},
	} {
		if doc, err = withDrillRow(doc, r, now); err != nil {
			t.Fatal(err)
		}
	}
	want := "# R\n\nprose\n\n" + drillTableBegin + "\n" +
		"| drill | fault injected | load during it | what happened | lost | rerun (last measured) |\n|---|---|---|---|---|---|\n" +
		"| `redis-kill` | f2 | l2 | h2 | **nothing**: 3 rows | `TOLLGATE_DRILLS=long go test -count=1 -run '^TestDrillRedisKill$' ./gateway/e2e/` (2026-03-01) |\n" +
		"| `hot-reload` | f3 | l3 | h3 | **nothing** | `TOLLGATE_DRILLS=long go test -count=1 -run '^TestDrillHotReload$' ./gateway/e2e/` (2026-03-01) |\n" +
		drillTableEnd + "\n\nmore prose\n"
	if doc != want {
		t.Fatalf("got\n%s\nwant\n%s", doc, want)
	}
	if _, err := withDrillRow("no markers", drillResult{id: "x"}, now); err == nil {
		t.Fatal("a document without markers was accepted")
	}
	// The real document has the markers.
	real, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "RELIABILITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := withDrillRow(string(real), drillResult{id: "hot-reload"}, now); err != nil {
		t.Fatalf("docs/RELIABILITY.md: %v", err)
	}
}
