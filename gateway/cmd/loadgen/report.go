package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/gateway/internal/testkit/loadgen"
)

// exitFailures is report's exit status when the report was written but
// some requests failed.
const exitFailures = 3

const reportUsage = `usage: loadgen report [flags] [RESULTS.jsonl]

Reads the JSON lines of a benchmark run (loadgen -json results, each with
"mode", "target", "level" and "round" added; stdin without a file) and
writes a markdown report: per mode, a table by concurrency and target with
medians over rounds, the latency added over the baseline target in the same
round, and its ratio to the floor target's; with -yardstick, a table of
each target's throughput as a share of the yardstick's. Exit status: 0, or 3 when the
report was written but requests failed, 1 on errors, 2 on bad flags.

`

// stringList collects a repeated flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ", ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func report(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, reportUsage)
		fs.PrintDefaults()
	}
	var (
		cfg               loadgen.ReportConfig
		header, sections  stringList
		summary, compare  stringList
		targets, levels   string
		outFile, intoFile string
	)
	fs.StringVar(&cfg.Title, "title", "", "heading of the report")
	fs.Var(&header, "header", "a line listed under the title (repeatable)")
	fs.Var(&sections, "section", `a table: "MODE:NAME:SETUP", e.g. "latency:non-streaming:mock with no delays" (repeatable, in order)`)
	fs.StringVar(&targets, "targets", "", "row order of the targets, space-separated; others follow by name")
	fs.StringVar(&cfg.Baseline, "baseline", "direct", "the target others are compared with in the same round")
	fs.Var(&compare, "compare", `"TARGET=BASELINE": compare TARGET with BASELINE instead of -baseline, e.g. tollgate-mcp=direct-mcp (repeatable)`)
	fs.StringVar(&cfg.Floor, "floor", "", "the target whose added latency the ratio column divides by (none: no column)")
	fs.StringVar(&cfg.Yardstick, "yardstick", "", "a target (nginx) the others' throughput is shown as a share of, per mode and level (none: no such table)")
	fs.Var(&summary, "summary", `"TARGET=DESCRIPTION": a target the summary reports (repeatable)`)
	fs.StringVar(&levels, "summary-levels", "1,32", "comma-separated concurrency levels of the summary")
	fs.StringVar(&outFile, "out", "", "also write the report to this file")
	fs.StringVar(&intoFile, "into", "", "replace the block between "+loadgen.MarkerBegin+" and "+loadgen.MarkerEnd+" in this file with the report (appended if absent)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "loadgen report: at most one results file, got %q\n", fs.Args())
		return 2
	}
	cfg.Header = header
	cfg.Targets = strings.Fields(targets)
	for _, s := range sections {
		parts := strings.SplitN(s, ":", 3)
		if len(parts) < 2 || parts[0] == "" {
			fmt.Fprintf(stderr, "loadgen report: -section %q is not MODE:NAME[:SETUP]\n", s)
			return 2
		}
		sec := loadgen.Section{Mode: parts[0], Name: parts[1]}
		if len(parts) == 3 {
			sec.Setup = parts[2]
		}
		cfg.Sections = append(cfg.Sections, sec)
	}
	for _, s := range summary {
		t, d, _ := strings.Cut(s, "=")
		if t == "" {
			fmt.Fprintf(stderr, "loadgen report: -summary %q is not TARGET=DESCRIPTION\n", s)
			return 2
		}
		cfg.Summary = append(cfg.Summary, loadgen.SummaryTarget{Target: t, Description: d})
	}
	for _, s := range compare {
		t, base, _ := strings.Cut(s, "=")
		if t == "" || base == "" {
			fmt.Fprintf(stderr, "loadgen report: -compare %q is not TARGET=BASELINE\n", s)
			return 2
		}
		if cfg.Baselines == nil {
			cfg.Baselines = map[string]string{}
		}
		cfg.Baselines[t] = base
	}
	for _, f := range strings.Split(levels, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "loadgen report: -summary-levels: %q is not a concurrency level\n", f)
			return 2
		}
		cfg.SummaryLevels = append(cfg.SummaryLevels, n)
	}

	in := stdin
	if fs.NArg() == 1 {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "loadgen report: %v\n", err)
			return 1
		}
		defer f.Close()
		in = f
	}
	runs, err := loadgen.ReadRecords(in)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen report: reading results: %v\n", err)
		return 1
	}
	if len(cfg.Sections) == 0 { // one table per mode, in order of appearance
		for _, r := range runs {
			if !hasSection(cfg.Sections, r.Mode) {
				cfg.Sections = append(cfg.Sections, loadgen.Section{Mode: r.Mode, Name: r.Mode})
			}
		}
	}
	var buf bytes.Buffer
	tot, err := loadgen.WriteReport(&buf, runs, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen report: %v\n", err)
		return 1
	}
	if _, err := stdout.Write(buf.Bytes()); err != nil {
		fmt.Fprintf(stderr, "loadgen report: %v\n", err)
		return 1
	}
	if outFile != "" {
		if err := writeFileAtomic(outFile, buf.Bytes()); err != nil {
			fmt.Fprintf(stderr, "loadgen report: %v\n", err)
			return 1
		}
	}
	if intoFile != "" {
		doc, err := os.ReadFile(intoFile)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "loadgen report: %v\n", err)
			return 1
		}
		doc, err = loadgen.SpliceReport(doc, buf.Bytes())
		if err == nil {
			err = writeFileAtomic(intoFile, doc)
		}
		if err != nil {
			fmt.Fprintf(stderr, "loadgen report: %s: %v\n", intoFile, err)
			return 1
		}
	}
	if tot.Failed() {
		fmt.Fprintf(stderr, "loadgen report: %d of %d measured requests failed, %d warmup requests failed\n",
			tot.Failures, tot.Requests, tot.WarmupFailures)
		return exitFailures
	}
	return 0
}

func hasSection(ss []loadgen.Section, mode string) bool {
	for _, s := range ss {
		if s.Mode == mode {
			return true
		}
	}
	return false
}

// writeFileAtomic replaces path with data, so a reader never sees half a
// report.
func writeFileAtomic(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
