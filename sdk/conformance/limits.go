package conformance

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// growthWindows are the request rounds of the memory growth check: a
// warm-up, then two windows; memory that grows in both windows by
// growthLimit or more in all is a leak.
func growthWindows(quick bool) (warm, window int) {
	if quick {
		return 10, 40
	}
	return 30, 150
}

const growthLimit = 1 << 20

// limitsChecks reports the instance's memory, whether it keeps growing
// over many requests, and the callbacks against the deadline; and
// measures the time per callback on a warm instance.
func (c *checker) limitsChecks(main *loaded) {
	m := &c.report.Measurements
	limit := uint64(c.opts.MemoryBytes)
	if m.InstanceMemory > limit/2 {
		c.add(fail("limits.memory", "an instance uses %s after configure, more than half its %s limit: little is left for requests; allocate less at start (ABI.md, Limits and sandbox)",
			size(m.InstanceMemory), size(limit)))
	} else {
		c.add(pass("limits.memory", "%s after configure, limit %s", size(m.InstanceMemory), size(limit)))
	}
	c.add(c.growthCheck())
	c.add(c.deadlineCheck())
}

// growthCheck runs rounds of one request and one short stream on a fresh
// instance and reads its memory after the warm-up and after each window.
func (c *checker) growthCheck() Result {
	l, err := c.load(1, c.config)
	if err != nil {
		return fail("limits.growth", "loading: %v", err)
	}
	warm, window := growthWindows(c.opts.Quick)
	ps := requests(nil)
	ps = ps[:len(ps)-1] // not the large body: its buffers are not a leak
	plain := streams(nil, true)
	var text stream
	for _, s := range plain {
		if s.name == "plain text" {
			text = s
		}
	}
	// Callback times are taken after the warm-up; their medians are the
	// measurements (a mean would carry the odd callback that a busy
	// machine descheduled, or that ran the guest's garbage collector).
	var reqTimes, chunkTimes []time.Duration
	var marks []uint64
	for round := range warm + 2*window {
		if round == warm || round == warm+window {
			marks = append(marks, l.rec.memory.Load())
		}
		if l.plugin.Phases()&wasmhost.PhaseRequest != 0 {
			r := newRequest(ps[round%len(ps)])
			start := time.Now()
			err := l.pipe.Request(r)
			if d := time.Since(start); round >= warm {
				reqTimes = append(reqTimes, d)
			}
			wasmhost.ReleaseRequest(r)
			var rej *wasmhost.RejectError
			if err != nil && !errors.As(err, &rej) && !failVerdict(err) {
				return c.growthFailure(round, err)
			}
		}
		sr := newStreamRun(text, defaultProbe())
		for sr.step(l.pipe) {
		}
		if sr.out.err != nil && !failVerdict(sr.out.err) {
			return c.growthFailure(round, sr.out.err)
		}
		if round >= warm {
			chunkTimes = append(chunkTimes, sr.times...)
		}
	}
	marks = append(marks, l.rec.memory.Load())
	c.growthPeak = l.rec.peak.Load()
	c.report.RequestCallback = median(reqTimes)
	if l.plugin.Phases()&wasmhost.PhaseChunk != 0 {
		c.report.ChunkCallback = median(chunkTimes)
	}
	grew := marks[2] - marks[0]
	detail := fmt.Sprintf("memory %s after %d rounds, %s after %d more, %s after %d more",
		size(marks[0]), warm, size(marks[1]), window, size(marks[2]), window)
	if marks[1] > marks[0] && marks[2] > marks[1] && grew >= growthLimit {
		return fail("limits.growth", "%s (a round is a request and a short stream): it keeps growing, about %s per round; free what a request allocates, and keep nothing per request in globals (ABI.md, Limits and sandbox)",
			detail, size(grew/uint64(2*window)))
	}
	return pass("limits.growth", "%s", detail)
}

func (c *checker) growthFailure(round int, err error) Result {
	if strings.Contains(err.Error(), "out of memory") {
		return fail("limits.growth", "out of memory after %d rounds of a request and a short stream: %v; free what a request allocates (ABI.md, Limits and sandbox)", round, err)
	}
	if failure(err) {
		c.overran[fmt.Sprintf("round %d", round)] = true
	}
	return skip("limits.growth", "a callback failed in round %d (%v); see the phases checks", round, err)
}

// deadlineCheck: no callback of the battery was stopped at the deadline.
func (c *checker) deadlineCheck() Result {
	if len(c.overran) == 0 {
		return pass("limits.deadline", "slowest callback %s, deadline %s", round(c.slowest), c.opts.Deadline)
	}
	names := make([]string, 0, len(c.overran))
	for n := range c.overran {
		names = append(names, n)
	}
	sort.Strings(names)
	more := ""
	if len(names) > 3 {
		more = fmt.Sprintf(" (and %d more)", len(names)-3)
		names = names[:3]
	}
	return fail("limits.deadline", "callbacks ran past the %s deadline and were stopped: %s%s; a callback must return well within the deadline, whatever the size of its input (ABI.md, Limits and sandbox)",
		c.opts.Deadline, strings.Join(names, ", "), more)
}

// median is the middle of ds (0 for none); ds is sorted in place.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func size(b uint64) string {
	switch {
	case b >= 10<<20:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", b>>10)
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= time.Microsecond:
		return d.Round(100 * time.Nanosecond)
	}
	return d
}
