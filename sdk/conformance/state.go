package conformance

import (
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// spread is the number of instances the state check spreads a stream's
// callbacks over.
const spread = 3

// stateChecks runs the streams again with the callbacks of each spread
// over several instances, and with two streams interleaved on one
// instance; each must come out as it did on one instance alone.
func (c *checker) stateChecks(main *loaded) {
	const must = "keep per-request data with state_set/state_get or facts, which live in the host, not in guest globals: two callbacks of one request may run on different instances, and one instance serves many requests (ABI.md, Guest exports)"
	ss := streams(c.words, c.opts.Quick)
	pipes := make([]*wasmhost.Pipeline, spread)
	for i := range pipes {
		l, err := c.load(1, c.config)
		if err != nil {
			c.add(fail("state.instances", "loading instance %d: %v", i+1, err))
			return
		}
		pipes[i] = l.pipe
	}
	var diffs []string
	for _, s := range ss {
		sr := newStreamRun(s, defaultProbe())
		for i := 0; sr.step(pipes[i%spread]); i++ {
		}
		c.note(sr)
		if d := c.differs(s.name, sr); d != "" {
			diffs = append(diffs, d)
		}
	}
	c.add(stateResult("state.instances", diffs, len(ss), fmt.Sprintf("on %d instances", spread), must))

	diffs = diffs[:0]
	for i := 0; i+1 < len(ss); i += 2 {
		a, b := newStreamRun(ss[i], defaultProbe()), newStreamRun(ss[i+1], defaultProbe())
		for moreA, moreB := true, true; moreA || moreB; {
			if moreA {
				moreA = a.step(main.pipe)
			}
			if moreB {
				moreB = b.step(main.pipe)
			}
		}
		for _, sr := range []*streamRun{a, b} {
			c.note(sr)
			if d := c.differs(sr.s.name, sr); d != "" {
				diffs = append(diffs, d+" (interleaved with stream "+other(a, b, sr).s.name+")")
			}
		}
	}
	c.add(stateResult("state.interleaved", diffs, len(ss)/2*2, "interleaved in pairs", must))
}

func other(a, b, sr *streamRun) *streamRun {
	if sr == a {
		return b
	}
	return a
}

// differs compares a run with the stream's run on one instance; streams
// with a callback stopped at the deadline are left to limits.deadline.
func (c *checker) differs(name string, sr *streamRun) string {
	if c.overran[name] {
		return ""
	}
	got, want := sr.out.String(), c.baseline[name]
	if got == want {
		return ""
	}
	return fmt.Sprintf("stream %s: alone on one instance %s, here %s", name, short(want), short(got))
}

func stateResult(name string, diffs []string, n int, how, must string) Result {
	if len(diffs) == 0 {
		return pass(name, "%d streams gave the same output %s", n, how)
	}
	failed, more := len(diffs), ""
	if len(diffs) > 2 {
		more = fmt.Sprintf(" (and %d more)", len(diffs)-2)
		diffs = diffs[:2]
	}
	return fail(name, "%d of %d streams came out differently %s: %s%s; %s", failed, n, how, strings.Join(diffs, "; "), more, must)
}

// short abbreviates an outcome for a message.
func short(s string) string {
	if len(s) <= 160 {
		return "[" + s + "]"
	}
	return "[" + s[:120] + " … " + s[len(s)-30:] + "]"
}
