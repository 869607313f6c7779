package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Record is one line of a benchmark's raw results: the Result of one load
// generator run and its place in the matrix (scripts/bench.sh writes these).
type Record struct {
	// Mode names the kind of load, e.g. "latency" or "stream".
	Mode string `json:"mode"`
	// Target names what was measured, e.g. "direct" or "tollgate".
	Target string `json:"target"`
	// Level is the concurrency.
	Level int `json:"level"`
	// Round is the repetition; runs of one round of a mode and level ran
	// back to back, so they are compared with each other.
	Round int `json:"round"`
	Result
}

// ReadRecords parses JSON lines of Records. Blank lines are skipped.
func ReadRecords(r io.Reader) ([]Record, error) {
	var runs []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var run Record
		if err := json.Unmarshal(line, &run); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if run.Mode == "" || run.Target == "" || run.Level <= 0 {
			return nil, fmt.Errorf("line %d: a run needs mode, target and level", n)
		}
		runs = append(runs, run)
	}
	return runs, sc.Err()
}

// Section is one mode's table in a report.
type Section struct {
	// Mode is the Record.Mode the table shows.
	Mode string
	// Name is the mode's short name, e.g. "non-streaming".
	Name string
	// Setup says how it was measured, e.g. "mock: no delays; 2s × 2
	// repetitions".
	Setup string
}

// ReportConfig lays out a benchmark report.
type ReportConfig struct {
	// Title is the report's heading (a markdown level-3 heading).
	Title string
	// Header lines are listed under the title (machine, commit, command).
	Header []string
	// Sections are the tables, in order.
	Sections []Section
	// Targets orders the rows of each level; targets not listed follow in
	// name order.
	Targets []string
	// Baseline is the target every other is compared with in the same
	// round ("direct": the load generator talking to the mock itself).
	Baseline string
	// Baselines names, for some targets, the target compared with
	// instead of Baseline: an MCP tool call through the gateway beside
	// one sent to the mock directly, not beside a chat completion. A
	// target named here as a baseline is compared with nothing, and a
	// target with its own baseline gets no ratio to the Floor (a proxy of
	// other requests).
	Baselines map[string]string
	// Floor is the proxy whose added latency the ratio column divides by
	// (the plain fasthttp proxy). Empty leaves the column out.
	Floor string
	// Summary lists the targets the summary line reports, each with a
	// description, at SummaryLevels.
	Summary       []SummaryTarget
	SummaryLevels []int
	// Yardstick is the target (nginx) whose throughput the yardstick
	// table divides every other target's by, per section and level.
	// Empty leaves the table out.
	Yardstick string
}

// SummaryTarget is a target named in a report's summary.
type SummaryTarget struct {
	Target      string
	Description string // e.g. "all four plugins on, memory stores"
}

// Totals counts a report's requests.
type Totals struct {
	// Requests is the number of measured requests.
	Requests int
	// Failures is the number of failed measured requests.
	Failures int
	// WarmupFailures is the number of failed warmup requests.
	WarmupFailures int
}

// Failed reports whether any request, measured or warmup, failed.
func (t Totals) Failed() bool { return t.Failures > 0 || t.WarmupFailures > 0 }

// cell aggregates the rounds of one mode, level and target. Figures are
// medians over rounds; the added figures are medians over rounds of the
// difference to the baseline in the same round, NaN when unknown.
type cell struct {
	target                        string
	level                         int
	stream                        bool
	rounds                        int
	rps                           float64
	p50, p95, p99                 float64 // latency, or time to first token for streams
	total50                       float64 // streams: time to [DONE]
	added50, added95              float64
	failures, count, warmupFailed int
	errors                        []string
}

// baselineOf returns the target t is compared with, and false if t is a
// baseline itself.
func (cfg *ReportConfig) baselineOf(t string) (string, bool) {
	if t == cfg.Baseline {
		return "", false
	}
	for _, b := range cfg.Baselines {
		if t == b {
			return "", false
		}
	}
	if b, ok := cfg.Baselines[t]; ok {
		return b, true
	}
	return cfg.Baseline, true
}

// key returns the figure a mode is judged by: the whole request's latency,
// or a stream's time to first token.
func key(r *Record) *Percentiles {
	if r.TTFT != nil {
		return r.TTFT
	}
	return &r.Latency
}

func median(v []float64) float64 {
	v = slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// cells aggregates the runs of one mode by level, in row order.
func cells(runs []Record, mode string, cfg *ReportConfig) []cell {
	type rk struct {
		level, round int
		target       string
	}
	byRound := map[rk]*Record{}
	type ck struct {
		level  int
		target string
	}
	group := map[ck][]*Record{}
	for i := range runs {
		r := &runs[i]
		if r.Mode != mode {
			continue
		}
		byRound[rk{r.Level, r.Round, r.Target}] = r
		group[ck{r.Level, r.Target}] = append(group[ck{r.Level, r.Target}], r)
	}
	out := make([]cell, 0, len(group))
	for k, rs := range group {
		c := cell{target: k.target, level: k.level, rounds: len(rs)}
		var rps, p50, p95, p99, tot, a50, a95 []float64
		for _, r := range rs {
			c.stream = c.stream || r.Stream
			c.failures += r.Failures
			c.count += r.Count
			c.warmupFailed += r.WarmupFailures
			for _, e := range r.Errors {
				if !slices.Contains(c.errors, e.Message) {
					c.errors = append(c.errors, e.Message)
				}
			}
			p := key(r)
			rps = append(rps, r.RequestsPerSec)
			if p.Samples == 0 { // every request failed: no latency
				continue
			}
			p50, p95, p99 = append(p50, p.P50), append(p95, p.P95), append(p99, p.P99)
			if r.StreamTotal != nil {
				tot = append(tot, r.StreamTotal.P50)
			}
			base, compared := cfg.baselineOf(k.target)
			if !compared {
				continue
			}
			if b := byRound[rk{r.Level, r.Round, base}]; b != nil && key(b).Samples > 0 {
				a50 = append(a50, p.P50-key(b).P50)
				a95 = append(a95, p.P95-key(b).P95)
			}
		}
		c.rps, c.p50, c.p95, c.p99, c.total50 = median(rps), median(p50), median(p95), median(p99), median(tot)
		c.added50, c.added95 = median(a50), median(a95)
		out = append(out, c)
	}
	rank := func(t string) int {
		if i := slices.Index(cfg.Targets, t); i >= 0 {
			return i
		}
		return len(cfg.Targets)
	}
	slices.SortFunc(out, func(a, b cell) int {
		if a.level != b.level {
			return a.level - b.level
		}
		if ra, rb := rank(a.target), rank(b.target); ra != rb {
			return ra - rb
		}
		return strings.Compare(a.target, b.target)
	})
	return out
}

// find returns the cell of target at level, or nil.
func find(cs []cell, target string, level int) *cell {
	for i := range cs {
		if cs[i].target == target && cs[i].level == level {
			return &cs[i]
		}
	}
	return nil
}

// WriteReport writes the markdown report of runs to w and returns its
// totals. A report with failures says so in its summary and in the
// failed/total column of every cell.
func WriteReport(w io.Writer, runs []Record, cfg ReportConfig) (Totals, error) {
	var tot Totals
	for _, r := range runs {
		tot.Requests += r.Count
		tot.Failures += r.Failures
		tot.WarmupFailures += r.WarmupFailures
	}
	var b strings.Builder
	if cfg.Title != "" {
		fmt.Fprintf(&b, "### %s\n\n", cfg.Title)
	}
	for _, h := range cfg.Header {
		fmt.Fprintf(&b, "- %s\n", h)
	}
	if len(cfg.Header) > 0 {
		b.WriteString("\n")
	}
	bySection := make([][]cell, len(cfg.Sections))
	for i, s := range cfg.Sections {
		bySection[i] = cells(runs, s.Mode, &cfg)
	}
	writeSummary(&b, cfg, bySection, tot)
	writeYardstick(&b, cfg, bySection)
	for i, s := range cfg.Sections {
		if len(bySection[i]) == 0 {
			continue
		}
		writeSection(&b, cfg, s, bySection[i])
	}
	_, err := io.WriteString(w, b.String())
	return tot, err
}

func writeSummary(b *strings.Builder, cfg ReportConfig, bySection [][]cell, tot Totals) {
	for _, st := range cfg.Summary {
		var lines []string
		for i, s := range cfg.Sections {
			var at, floor, ratios []string
			for _, lv := range cfg.SummaryLevels {
				c := find(bySection[i], st.Target, lv)
				if c == nil {
					continue
				}
				at = append(at, fmt.Sprintf("**%s µs** at c=%d", signed(c.added50), lv))
				if f := find(bySection[i], cfg.Floor, lv); f != nil && cfg.Floor != "" {
					floor = append(floor, signed(f.added50))
					ratios = append(ratios, ratio(c.added50, f.added50))
				}
			}
			if len(at) == 0 {
				continue
			}
			what := "latency"
			if bySection[i][0].stream {
				what = "time to first token"
			}
			line := fmt.Sprintf("- %s, %s: %s", s.Name, what, strings.Join(at, ", "))
			if len(floor) == len(at) {
				line += fmt.Sprintf(" (%s: %s µs; ratio %s)", cfg.Floor, strings.Join(floor, " / "), strings.Join(ratios, " / "))
			}
			lines = append(lines, line)
		}
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(b, "**Summary: %s (%s), p50 added over direct-to-mock**\n\n%s\n\n",
			st.Target, st.Description, strings.Join(lines, "\n"))
	}
	switch {
	case tot.Failed():
		fmt.Fprintf(b, "**FAILURES: %d of %d measured requests failed", tot.Failures, tot.Requests)
		if tot.WarmupFailures > 0 {
			fmt.Fprintf(b, ", and %d warmup requests", tot.WarmupFailures)
		}
		b.WriteString("** — see the failed/total column and the errors under each table.\n\n")
	default:
		fmt.Fprintf(b, "Failures: none (0 of %d measured requests, 0 warmup failures).\n\n", tot.Requests)
	}
}

func ratio(v, floor float64) string {
	if math.IsNaN(v) || math.IsNaN(floor) || floor <= 0 {
		return "–"
	}
	return strconv.FormatFloat(v/floor, 'f', 1, 64) + "×"
}

func writeSection(b *strings.Builder, cfg ReportConfig, s Section, cs []cell) {
	stream := cs[0].stream
	// Streams against a mock with a first-token delay are shown in ms;
	// everything faster in µs.
	unit, div := "µs", 1.0
	if base := find(cs, cfg.Baseline, cs[0].level); stream && base != nil && base.p50 >= 10000 {
		unit, div = "ms", 1000
	}
	name := s.Name
	if name != "" {
		name = strings.ToUpper(name[:1]) + name[1:]
	}
	fmt.Fprintf(b, "#### %s", name)
	if s.Setup != "" {
		fmt.Fprintf(b, " (%s)", s.Setup)
	}
	b.WriteString("\n\n")
	what, rate := "", "req/s"
	if stream {
		what, rate = "TTFT ", "streams/s"
	}
	fmt.Fprintf(b, "| conc | target | %s | failed/total | %sp50 %s | %sp95 %s | %sp99 %s |", rate, what, unit, what, unit, what, unit)
	if stream {
		fmt.Fprintf(b, " total p50 %s |", unit)
	}
	fmt.Fprintf(b, " added %sp50 µs | added %sp95 µs |", what, what)
	if cfg.Floor != "" {
		fmt.Fprintf(b, " added p50 ÷ %s |", cfg.Floor)
	}
	b.WriteString("\n|---:|---|---:|---:|---:|---:|---:|")
	if stream {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|")
	if cfg.Floor != "" {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	var notes []string
	prec := 0
	if div > 1 {
		prec = 2
	}
	for _, c := range cs {
		failed := fmt.Sprintf("%d/%d", c.failures, c.count)
		if c.failures > 0 {
			failed = "**" + failed + "**"
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s |", c.level, c.target, num(c.rps, 0), failed,
			num(c.p50/div, prec), num(c.p95/div, prec), num(c.p99/div, prec))
		if stream {
			fmt.Fprintf(b, " %s |", num(c.total50/div, prec))
		}
		fmt.Fprintf(b, " %s | %s |", signed(c.added50), signed(c.added95))
		if cfg.Floor != "" {
			r := "–"
			base, compared := cfg.baselineOf(c.target)
			if f := find(cs, cfg.Floor, c.level); f != nil && c.target != cfg.Floor && compared && base == cfg.Baseline {
				r = ratio(c.added50, f.added50)
			}
			fmt.Fprintf(b, " %s |", r)
		}
		b.WriteString("\n")
		if c.failures > 0 || c.warmupFailed > 0 {
			note := fmt.Sprintf("- c=%d %s: %d failed, %d failed warmup requests", c.level, c.target, c.failures, c.warmupFailed)
			if len(c.errors) > 0 {
				note += ": " + strings.Join(c.errors, "; ")
			}
			notes = append(notes, note)
		}
	}
	b.WriteString("\n")
	if len(notes) > 0 {
		b.WriteString("Failures:\n\n")
		b.WriteString(strings.Join(notes, "\n"))
		b.WriteString("\n\n")
	}
}

// num formats v with at least prec decimals, more for small values (three
// significant digits), and "–" for NaN.
func num(v float64, prec int) string {
	if math.IsNaN(v) {
		return "–"
	}
	a := math.Abs(v)
	switch {
	case a >= 100 || a == 0:
	case a >= 10:
		prec = max(prec, 1)
	default:
		prec = max(prec, 2)
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// signed is num in µs with an explicit sign.
func signed(v float64) string {
	s := num(v, 0)
	if !math.IsNaN(v) && v > 0 {
		return "+" + s
	}
	return s
}

// Markers delimit the generated block of a document; SpliceReport
// replaces what is between them.
const (
	MarkerBegin = "<!-- make-bench:begin -->"
	MarkerEnd   = "<!-- make-bench:end -->"
)

// SpliceReport returns doc with the text between MarkerBegin and MarkerEnd
// replaced by report, or, if doc has no such block, doc with the block
// appended.
func SpliceReport(doc, report []byte) ([]byte, error) {
	block := make([]byte, 0, len(report)+len(MarkerBegin)+len(MarkerEnd)+4)
	block = append(block, MarkerBegin+"\n"...)
	block = append(block, bytes.TrimRight(report, "\n")...)
	block = append(block, "\n"+MarkerEnd...)
	i := bytes.Index(doc, []byte(MarkerBegin))
	j := bytes.Index(doc, []byte(MarkerEnd))
	switch {
	case i < 0 && j < 0:
		out := bytes.TrimRight(slices.Clone(doc), "\n")
		if len(out) > 0 {
			out = append(out, "\n\n"...)
		}
		return append(append(out, block...), '\n'), nil
	case i < 0 || j < i:
		return nil, fmt.Errorf("the document has %q without a matching %q before it", MarkerEnd, MarkerBegin)
	case j < 0:
		return nil, fmt.Errorf("the document has %q without %q after it", MarkerBegin, MarkerEnd)
	case bytes.Contains(doc[j+len(MarkerEnd):], []byte(MarkerBegin)):
		return nil, fmt.Errorf("the document has more than one %q block", MarkerBegin)
	}
	out := make([]byte, 0, len(doc)+len(block))
	out = append(out, doc[:i]...)
	out = append(out, block...)
	return append(out, doc[j+len(MarkerEnd):]...), nil
}
