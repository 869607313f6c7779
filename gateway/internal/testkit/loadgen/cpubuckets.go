package loadgen

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Buckets are where scripts/cpubreak.sh splits a gateway's CPU, in the
// order it reports them. Each profile sample goes to exactly one.
var Buckets = []string{"guest", "wasmhost", "hostsvc", "rueidis", "pgx", "fasthttp", "json", "memmove", "syscall", "sched_gc", "other"}

// CPUSplit is a CPU profile's samples summed by bucket.
type CPUSplit struct {
	// Total is the CPU time of all samples.
	Total time.Duration
	// By is the CPU time per bucket (keys of Buckets).
	By map[string]time.Duration
	// Syscalls splits By["syscall"] by the owner of the frames that made
	// the call (a bucket of owner: fasthttp, rueidis, pgx, other, ...).
	Syscalls map[string]time.Duration
	// Plugins splits the samples taken inside a plugin's callback by
	// plugin and bucket: those labelled plugin=NAME (the gateway labels
	// its callbacks with -pprof, wasmhost.SetProfileLabels). Its guest
	// bucket is the plugin's own code; the others are the host's work for
	// the plugin inside the callback (host functions, services).
	Plugins map[string]map[string]time.Duration
}

var (
	// reSyscall marks a sample spent in (or entering) the kernel.
	reSyscall = regexp.MustCompile(`^(syscall\.|internal/runtime/syscall|golang\.org/x/sys/unix\.|runtime\.netpoll|runtime\.write1?$|runtime\.read$|runtime\.epoll|internal/poll\.runtime_pollWait)`)
	// reSchedGC marks the scheduler, the collector, allocation and stack
	// growth, and what the runtime books as System/GC.
	reSchedGC = regexp.MustCompile(`^runtime\.(_System|_GC|_VDSO|schedule|findRunnable|findrunnable|gcBgMarkWorker|gcDrain|gcAssist|mallocgc|newobject|makeslice|growslice|newstack|morestack|bgsweep|bgscavenge|mcall|park_m|goschedImpl|gopreempt_m|mstart|stopm|startm|wakep|notesleep|futex|usleep|osyield|markroot|scanobject|sweepone|gcStart|gcMarkDone|gcMarkTermination|systemstack$|rawstring|rawbyteslice|concatstring)`)
	// reThirdParty matches frames outside Go's standard library.
	reThirdParty = regexp.MustCompile(`^(github\.com|golang\.org|google\.golang\.org|go\.opentelemetry\.io|gopkg\.in)/`)
	// owners maps a frame outside the standard library to a bucket; the
	// first match wins.
	owners = []struct {
		re     *regexp.Regexp
		bucket string
	}{
		{regexp.MustCompile(`^github\.com/redis/rueidis`), "rueidis"},
		{regexp.MustCompile(`^github\.com/jackc/`), "pgx"},
		{regexp.MustCompile(`^github\.com/valyala/fastjson|^github\.com/tollgate/tollgate/gateway/internal/(openai|sse|anthropic|responses|proxy/stream)[./]`), "json"},
		{regexp.MustCompile(`^github\.com/tollgate/tollgate/gateway/internal/redisx[./]`), "rueidis"},
		{regexp.MustCompile(`^github\.com/tollgate/tollgate/gateway/internal/(hostsvc|limiter|budget|tenant|tenantstore|store|pricing|accounting)[./]`), "hostsvc"},
		{regexp.MustCompile(`^github\.com/tollgate/tollgate/sdk/wasmhost|^github\.com/tetratelabs/wazero`), "wasmhost"},
		{regexp.MustCompile(`^github\.com/valyala/(fasthttp|bytebufferpool)|^github\.com/tollgate/tollgate/gateway/internal/(proxy|upstream|sockio)[./]`), "fasthttp"},
	}
)

// owner is the bucket of a stack (leaf first) by its innermost frame
// outside Go's standard library (encoding/json counts as json): what the
// standard library did, it did for that caller. golang.org/x/sys is
// looked through like the standard library.
func owner(stack []string) string {
	for _, f := range stack {
		if strings.HasPrefix(f, "encoding/json.") {
			return "json"
		}
		if !reThirdParty.MatchString(f) || strings.HasPrefix(f, "golang.org/x/sys/") {
			continue
		}
		for _, o := range owners {
			if o.re.MatchString(f) {
				return o.bucket
			}
		}
		return "other"
	}
	return "other"
}

// BucketOf returns the bucket of one sample's stack, leaf first. The leaf
// decides guest wasm (wazero-compiled code has no Go symbols: the runtime
// books it as runtime._ExternalCode) and copies (runtime.memmove); a
// syscall frame anywhere makes it a syscall, the scheduler's or the
// collector's frames scheduler + GC; otherwise its owner decides. For a
// syscall, the owner of the call is returned too.
func BucketOf(stack []string) (bucket, syscallOwner string) {
	if len(stack) == 0 {
		return "other", ""
	}
	if strings.HasPrefix(stack[0], "runtime._ExternalCode") {
		return "guest", ""
	}
	for _, f := range stack {
		if reSyscall.MatchString(f) {
			return "syscall", owner(stack)
		}
	}
	if stack[0] == "runtime.memmove" {
		return "memmove", ""
	}
	for _, f := range stack {
		if reSchedGC.MatchString(f) {
			return "sched_gc", ""
		}
	}
	return owner(stack), ""
}

// SplitCPU reads the text of `go tool pprof -traces` (samples separated by
// dashed lines, each "  10ms   leaf" then one caller a line) and sums the
// samples by bucket.
func SplitCPU(r io.Reader) (CPUSplit, error) {
	s := CPUSplit{By: map[string]time.Duration{}, Syscalls: map[string]time.Duration{}, Plugins: map[string]map[string]time.Duration{}}
	var (
		stack  []string
		w      time.Duration
		plugin string // the sample's plugin label
	)
	flush := func() {
		if len(stack) > 0 && w > 0 {
			b, o := BucketOf(stack)
			s.By[b] += w
			if b == "syscall" {
				s.Syscalls[o] += w
			}
			if plugin != "" {
				if s.Plugins[plugin] == nil {
					s.Plugins[plugin] = map[string]time.Duration{}
				}
				s.Plugins[plugin][b] += w
			}
			s.Total += w
		}
		stack, w, plugin = stack[:0], 0, ""
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "-----------+"):
			flush()
		case len(fields) == 0:
		case !strings.HasPrefix(line, " "): // File:, Type:, Duration: ...
		case len(stack) == 0 && w == 0 && strings.HasSuffix(fields[0], ":"):
			// A label of the sample, "key:  value" (pprof joins a key's
			// values with commas, in brackets when there are several).
			if fields[0] == "plugin:" && len(fields) == 2 {
				plugin = fields[1]
			}
		case len(stack) == 0 && w == 0 && len(fields) >= 2:
			d, err := parseSampleValue(fields[0])
			if err != nil {
				return s, fmt.Errorf("reading a sample %q: %w", line, err)
			}
			w, stack = d, append(stack, fields[1])
		case len(stack) > 0:
			stack = append(stack, fields[0])
		}
	}
	flush()
	return s, sc.Err()
}

// parseSampleValue reads pprof's sample value: "10ms", "1.50s", "250us".
func parseSampleValue(v string) (time.Duration, error) {
	v = strings.Replace(v, "µs", "us", 1)
	if d, err := time.ParseDuration(v); err == nil {
		return d, nil
	}
	// A bare count (a profile of another sample type).
	n, err := strconv.ParseFloat(v, 64)
	return time.Duration(n), err
}

// WritePermille prints "bucket per-mille" for every bucket, then
// "sys_OWNER per-mille" for the syscalls by owner, then
// "plugin:NAME:BUCKET per-mille" for the samples labelled with a plugin
// (buckets with none left out), then "samples N" (of 10 ms), the lines
// scripts/cpubreak.sh reads.
func (s CPUSplit) WritePermille(w io.Writer) error {
	pm := func(d time.Duration) float64 {
		if s.Total <= 0 {
			return 0
		}
		return float64(d) * 1000 / float64(s.Total)
	}
	var b strings.Builder
	for _, k := range Buckets {
		fmt.Fprintf(&b, "%s %.0f\n", k, pm(s.By[k]))
	}
	for _, k := range Buckets {
		fmt.Fprintf(&b, "sys_%s %.0f\n", k, pm(s.Syscalls[k]))
	}
	plugins := make([]string, 0, len(s.Plugins))
	for p := range s.Plugins {
		plugins = append(plugins, p)
	}
	sort.Strings(plugins)
	for _, p := range plugins {
		for _, k := range Buckets {
			if d := s.Plugins[p][k]; d > 0 {
				fmt.Fprintf(&b, "plugin:%s:%s %.0f\n", p, k, pm(d))
			}
		}
	}
	fmt.Fprintf(&b, "samples %d\n", s.Total/(10*time.Millisecond))
	_, err := io.WriteString(w, b.String())
	return err
}
