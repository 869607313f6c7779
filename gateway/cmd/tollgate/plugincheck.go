package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/sdk/conformance"
)

const pluginCheckUsage = `usage: tollgate plugin check [-config JSON|@FILE] [-json] [-quick] [-deadline D] [-memory MiB] FILE.wasm...

Runs the conformance suite against built plugin modules (any language):
exports, configure, phases, state, limits; prints one line per check and
the module's measurements. With several modules, their measurements also
side by side. Without -config, a module is given the "config" of the
plugin_test.json beside it, if there is one, else {}. Exits 1 when a check
fails, 2 on a usage error.
`

// pluginCheck runs `tollgate plugin check`.
func pluginCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, pluginCheckUsage)
		fs.PrintDefaults()
	}
	config := fs.String("config", "{}", "the plugin's config: JSON, or @FILE to read it from FILE")
	asJSON := fs.Bool("json", false, "print the reports as JSON")
	quick := fs.Bool("quick", false, "a smaller battery (a word split in the middle only, fewer rounds)")
	deadline := fs.Duration("deadline", 0, "the callback deadline (default: the gateway's, 250ms)")
	memory := fs.Int64("memory", 0, "an instance's memory limit in MiB (default: the gateway's, 64)")
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if len(files) == 0 {
		fs.Usage()
		return 2
	}
	cfg, err := readConfigFlag(*config)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate plugin check: -config: %v\n", err)
		return 2
	}
	configSet := false
	fs.Visit(func(f *flag.Flag) { configSet = configSet || f.Name == "config" })
	var reports []*conformance.Report
	code := 0
	for _, f := range files {
		opts := conformance.Options{Config: cfg, Quick: *quick, Deadline: *deadline, MemoryBytes: *memory << 20}
		from := ""
		if !configSet {
			if c, path, err := configBeside(f); err != nil {
				fmt.Fprintf(stderr, "tollgate plugin check: %v\n", err)
				return 2
			} else if c != nil {
				opts.Config, from = c, path
			}
		}
		rep, err := conformance.Check(f, opts)
		if err != nil {
			fmt.Fprintf(stderr, "tollgate plugin check: %v\n", err)
			return 1
		}
		if !rep.OK() {
			code = 1
		}
		reports = append(reports, rep)
		if !*asJSON {
			if from != "" {
				fmt.Fprintf(stdout, "config: the one in %s\n", from)
			}
			printReport(stdout, rep)
			if !configSet && from == "" && refusedConfig(rep) {
				fmt.Fprintf(stdout, "the module refused the config {}: give it the config it runs with, -config '{...}' or -config @FILE\n\n")
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reports); err != nil {
			fmt.Fprintf(stderr, "tollgate plugin check: %v\n", err)
			return 1
		}
	} else if len(reports) > 1 {
		printSideBySide(stdout, reports)
	}
	return code
}

// parseInterspersed parses flags given before, between or after the
// positional arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// configBeside returns the "config" of the plugin_test.json in the folder
// of the module at wasm, or of the folder above (a module built into a
// plugin folder's subfolder), and that file's path; nil if there is none.
func configBeside(wasm string) ([]byte, string, error) {
	dir := filepath.Dir(wasm)
	for _, d := range []string{dir, filepath.Dir(dir)} {
		path := filepath.Join(d, "plugin_test.json")
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var f struct {
			Config json.RawMessage `json:"config"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, "", fmt.Errorf("%s: %v (give -config to check the module with another config)", path, err)
		}
		if len(f.Config) == 0 {
			return nil, "", nil
		}
		return f.Config, path, nil
	}
	return nil, "", nil
}

// refusedConfig reports whether the module failed the configure check.
func refusedConfig(rep *conformance.Report) bool {
	for _, r := range rep.Results {
		if r.Name == "configure" && !r.OK && !r.Skipped {
			return true
		}
	}
	return false
}

// readConfigFlag reads -config: JSON, or @FILE.
func readConfigFlag(v string) ([]byte, error) {
	b := []byte(v)
	if name, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if b, err = os.ReadFile(name); err != nil {
			return nil, err
		}
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("not valid JSON: %.60s", b)
	}
	return b, nil
}

func printReport(w io.Writer, rep *conformance.Report) {
	fmt.Fprintf(w, "%s\n", rep.Module)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tDETAIL")
	for _, r := range rep.Results {
		res := "ok"
		switch {
		case r.Skipped:
			res = "skip"
		case !r.OK:
			res = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, res, r.Detail)
	}
	tw.Flush()
	m := rep.Measurements
	fmt.Fprintf(w, "module %s, cold compile %s, instance memory %s after configure (peak %s), request callback %s, chunk callback %s\n",
		kib(uint64(m.ModuleBytes)), ms(m.ColdCompile), mib(m.InstanceMemory), mib(m.PeakMemory), micro(m.RequestCallback), micro(m.ChunkCallback))
	if rep.OK() {
		fmt.Fprintln(w, "conforms")
	} else {
		fmt.Fprintln(w, "does not conform: fix what the FAIL lines say, rebuild, and run `tollgate plugin check` again")
	}
	fmt.Fprintln(w)
}

// printSideBySide prints the modules' measurements in columns.
func printSideBySide(w io.Writer, reps []*conformance.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, f func(conformance.Measurements) string) {
		fmt.Fprintf(tw, "%s\t", name)
		for _, r := range reps {
			fmt.Fprintf(tw, "%s\t", f(r.Measurements))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "\t")
	for _, r := range reps {
		fmt.Fprintf(tw, "%s\t", filepath.Base(r.Module))
	}
	fmt.Fprintln(tw)
	row("module size", func(m conformance.Measurements) string { return kib(uint64(m.ModuleBytes)) })
	row("cold compile", func(m conformance.Measurements) string { return ms(m.ColdCompile) })
	row("instance memory", func(m conformance.Measurements) string { return mib(m.InstanceMemory) })
	row("request callback", func(m conformance.Measurements) string { return micro(m.RequestCallback) })
	row("chunk callback", func(m conformance.Measurements) string { return micro(m.ChunkCallback) })
	tw.Flush()
}

func kib(b uint64) string { return fmt.Sprintf("%d KiB", (b+512)>>10) }
func mib(b uint64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }
func ms(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

func micro(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f µs", float64(d)/float64(time.Microsecond))
}
