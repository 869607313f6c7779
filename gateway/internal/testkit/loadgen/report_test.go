package loadgen

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// rec builds a Record whose key figures are p50 and p95 = p50 × 1.5 (µs);
// streams get a time to first token of p50 and a total of p50 + 100 ms.
func rec(mode, target string, level, round int, p50 float64, failures int) Record {
	r := Record{Mode: mode, Target: target, Level: level, Round: round}
	r.Count = 1000
	r.Failures = failures
	r.Successes = r.Count - failures
	r.RequestsPerSec = 1e6 / p50 * float64(level)
	p := Percentiles{Samples: r.Successes, P50: p50, P95: p50 * 1.5, P99: p50 * 2}
	if mode == "latency" {
		r.Latency = p
		return r
	}
	r.Stream = true
	r.TTFT = &p
	r.StreamTotal = &Percentiles{Samples: r.Successes, P50: p50 + 100000}
	r.Latency = *r.StreamTotal
	return r
}

// matrix is a small run: each proxy adds a fixed amount to direct (twice
// as much at 32 concurrent), plus 10 µs × the round; round 2 is 40 µs
// slower for every target.
func matrix(failAt string) []Record {
	added := map[string]float64{"direct": 0, "fasthttp": 50, "nginx": 60, "tollgate": 100, "tollgate-all4": 200}
	base := map[string]float64{"latency": 100, "stream": 51000}
	scale := map[int]float64{1: 1, 32: 2}
	var out []Record
	for _, mode := range []string{"latency", "stream"} {
		for _, level := range []int{1, 32} {
			for round := 1; round <= 2; round++ {
				for _, t := range []string{"tollgate-all4", "direct", "nginx", "fasthttp", "tollgate"} {
					// Round 2 is slower for everyone by 40 µs, and the
					// proxies by 10 µs × round more.
					p50 := base[mode] + float64(40*(round-1))
					if t != "direct" {
						p50 += added[t]*scale[level] + float64(10*round)
					}
					fails := 0
					if failAt == mode+"/"+t {
						fails = 3
					}
					out = append(out, rec(mode, t, level, round, p50, fails))
				}
			}
		}
	}
	return out
}

func reportConfig() ReportConfig {
	return ReportConfig{
		Title:  "make bench",
		Header: []string{"Machine: test", "Command: `make bench`"},
		Sections: []Section{
			{Mode: "latency", Name: "non-streaming", Setup: "mock: no delays"},
			{Mode: "stream", Name: "streaming 50 ms", Setup: "mock: TTFT 50 ms"},
			{Mode: "absent", Name: "never measured"},
		},
		Targets:       []string{"direct", "fasthttp", "nginx", "tollgate", "tollgate-all4"},
		Baseline:      "direct",
		Floor:         "fasthttp",
		Summary:       []SummaryTarget{{Target: "tollgate-all4", Description: "all four plugins on, memory stores"}},
		SummaryLevels: []int{1, 32},
		Yardstick:     "nginx",
	}
}

func TestWriteReportGolden(t *testing.T) {
	var b bytes.Buffer
	tot, err := WriteReport(&b, matrix(""), reportConfig())
	if err != nil {
		t.Fatal(err)
	}
	if tot.Failed() || tot.Requests != 2*2*2*5*1000 {
		t.Errorf("totals %+v; want 40000 requests, none failed", tot)
	}
	golden := filepath.Join("testdata", "report.golden.md")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("report differs from %s (run with -update after checking):\n%s", golden, got)
	}
}

// The added figures are medians over rounds of the per-round difference,
// and the ratio divides by the floor's added p50.
func TestReportCells(t *testing.T) {
	cfg := reportConfig()
	cs := cells(matrix(""), "latency", &cfg)
	if len(cs) != 10 {
		t.Fatalf("%d cells, want 10 (2 levels × 5 targets)", len(cs))
	}
	order := []string{"direct", "fasthttp", "nginx", "tollgate", "tollgate-all4"}
	for i, c := range cs[:5] {
		if c.level != 1 || c.target != order[i] {
			t.Errorf("row %d is c=%d %s, want c=1 %s", i, c.level, c.target, order[i])
		}
	}
	tests := []struct {
		target           string
		level            int
		added50, added95 float64
		ratio            string
	}{
		// Round 1: +200+10, round 2: +200+20; p95 = 1.5 × p50 in each.
		{"tollgate-all4", 1, 215, 322.5, "3.3×"},
		{"fasthttp", 1, 65, 97.5, "–"},
		{"tollgate", 32, 215, 322.5, "1.9×"},
		{"direct", 1, math.NaN(), math.NaN(), "–"},
	}
	for _, tt := range tests {
		c := find(cs, tt.target, tt.level)
		if c == nil {
			t.Fatalf("no cell for %s c=%d", tt.target, tt.level)
		}
		if !same(c.added50, tt.added50) || !same(c.added95, tt.added95) {
			t.Errorf("%s c=%d: added p50 %v p95 %v, want %v %v", tt.target, tt.level, c.added50, c.added95, tt.added50, tt.added95)
		}
		if c.rounds != 2 || c.count != 2000 {
			t.Errorf("%s c=%d: %d rounds, %d requests; want 2, 2000", tt.target, tt.level, c.rounds, c.count)
		}
		r := "–"
		if tt.target != cfg.Floor && tt.target != cfg.Baseline {
			r = ratio(c.added50, find(cs, cfg.Floor, tt.level).added50)
		}
		if r != tt.ratio {
			t.Errorf("%s c=%d: ratio %s, want %s", tt.target, tt.level, r, tt.ratio)
		}
	}
}

func same(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

func TestWriteReportShowsFailures(t *testing.T) {
	var b bytes.Buffer
	runs := matrix("stream/tollgate-all4")
	runs[0].WarmupFailures = 2
	runs[0].Errors = []ErrorCount{{Message: "HTTP 429: slow down", Count: 1}}
	tot, err := WriteReport(&b, runs, reportConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !tot.Failed() || tot.Failures != 2*2*3 || tot.WarmupFailures != 2 {
		t.Errorf("totals %+v; want 12 failures and 2 warmup failures", tot)
	}
	out := b.String()
	for _, want := range []string{
		"**FAILURES: 12 of 40000 measured requests failed, and 2 warmup requests**",
		"| 1 | tollgate-all4 | 19.5 | **6/2000** |",
		"- c=1 tollgate-all4: 6 failed, 0 failed warmup requests",
		"- c=1 tollgate-all4: 0 failed, 2 failed warmup requests: HTTP 429: slow down",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Failures: none") {
		t.Error("a report with failures says there were none")
	}
}

func TestReadRecords(t *testing.T) {
	in := `{"mode":"latency","target":"direct","level":8,"round":2,"count":5,"failures":1,"latency_us":{"samples":4,"p50":90.5,"p95":120}}

{"mode":"stream","target":"tollgate","level":1,"round":1,"stream":true,"ttft_us":{"samples":3,"p50":51000}}
`
	rs, err := ReadRecords(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Level != 8 || rs[0].Round != 2 || rs[0].Failures != 1 || rs[0].Latency.P95 != 120 ||
		rs[1].TTFT == nil || rs[1].TTFT.P50 != 51000 || !rs[1].Stream {
		t.Errorf("ReadRecords = %+v", rs)
	}
	for _, bad := range []string{`{"mode":"latency","level":1}`, `{"target":"x","mode":"m","level":0}`, `{`} {
		if _, err := ReadRecords(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadRecords(%q) accepted", bad)
		}
	}
}

func TestSpliceReport(t *testing.T) {
	const report = "### new\n\n| a |\n"
	block := MarkerBegin + "\n### new\n\n| a |\n" + MarkerEnd
	tests := []struct {
		name, doc, want string
		bad             bool
	}{
		{"replaces the block", "# B\n\nintro\n" + MarkerBegin + "\nold\ntable\n" + MarkerEnd + "\n\n## After\n",
			"# B\n\nintro\n" + block + "\n\n## After\n", false},
		{"empty block", "x\n" + MarkerBegin + MarkerEnd + "\ny\n", "x\n" + block + "\ny\n", false},
		{"appends when absent", "# B\n\ntext\n\n\n", "# B\n\ntext\n\n" + block + "\n", false},
		{"new file", "", block + "\n", false},
		{"end before begin", MarkerEnd + "\n" + MarkerBegin, "", true},
		{"no end", "a\n" + MarkerBegin + "\nb\n", "", true},
		{"no begin", "a\n" + MarkerEnd + "\n", "", true},
		{"two blocks", MarkerBegin + MarkerEnd + "\n" + MarkerBegin + MarkerEnd, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SpliceReport([]byte(tt.doc), []byte(report))
			if (err != nil) != tt.bad {
				t.Fatalf("err = %v, want error %v", err, tt.bad)
			}
			if !tt.bad && string(got) != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// TestReportOwnBaseline: a target given its own baseline is compared
// with that one, which is compared with nothing, and neither gets a ratio
// to the floor.
func TestReportOwnBaseline(t *testing.T) {
	cfg := reportConfig()
	cfg.Baselines = map[string]string{"tollgate-mcp": "direct-mcp"}
	runs := matrix("")
	for round := 1; round <= 2; round++ {
		// direct-mcp is 300 µs above direct; tollgate-mcp adds 120 µs +
		// 10 µs × the round to direct-mcp.
		p50 := 100 + float64(40*(round-1)) + 300
		runs = append(runs, rec("latency", "direct-mcp", 1, round, p50, 0),
			rec("latency", "tollgate-mcp", 1, round, p50+120+float64(10*round), 0))
	}
	cs := cells(runs, "latency", &cfg)
	if c := find(cs, "tollgate-mcp", 1); c == nil || c.added50 != 135 {
		t.Fatalf("tollgate-mcp: %+v, want added p50 135", c)
	}
	if c := find(cs, "direct-mcp", 1); c == nil || !math.IsNaN(c.added50) {
		t.Fatalf("direct-mcp: %+v, want no added figure", c)
	}
	if c := find(cs, "tollgate", 1); c == nil || c.added50 != 115 {
		t.Fatalf("tollgate: %+v, still compared with direct", c)
	}
	var b strings.Builder
	writeSection(&b, cfg, cfg.Sections[0], cs)
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "| 1 | tollgate-mcp |") || strings.HasPrefix(line, "| 1 | direct-mcp |") {
			if !strings.HasSuffix(line, "| – |") {
				t.Errorf("a ratio to the floor for another kind of request: %s", line)
			}
		}
		if strings.HasPrefix(line, "| 1 | tollgate |") && strings.HasSuffix(line, "| – |") {
			t.Errorf("tollgate lost its ratio to the floor: %s", line)
		}
	}
}
