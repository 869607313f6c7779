package conformance

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// phasesChecks runs the battery once on one instance: every request
// through the request and response_headers phases, every stream through
// the chunk and end phases. A callback stopped at its deadline counts
// for limits.deadline, not here.
func (c *checker) phasesChecks(main *loaded) {
	ph := main.plugin.Phases()
	if ph == 0 {
		c.add(fail("phases", "the module takes part in no phase: export the callbacks of the phases it handles, and report them in tollgate_phases (ABI.md, Guest exports)"))
		return
	}
	if ph&wasmhost.PhaseRequest != 0 || ph&wasmhost.PhaseResponseHeaders != 0 {
		req, hdr := c.requestBattery(main.pipe)
		if ph&wasmhost.PhaseRequest != 0 {
			c.add(req)
		}
		if ph&wasmhost.PhaseResponseHeaders != 0 {
			c.add(hdr)
		}
	}
	var chunkProblems, endProblems []string
	var ran int
	for _, s := range streams(c.words, c.opts.Quick) {
		sr := newStreamRun(s, defaultProbe())
		for sr.step(main.pipe) {
		}
		ran++
		c.note(sr)
		c.baseline[s.name] = sr.out.String()
		if err := sr.out.err; err != nil && !failure(err) && !failVerdict(err) {
			chunkProblems = append(chunkProblems, fmt.Sprintf("stream %s: %v", s.name, err))
		}
		if sr.endFailures > 0 {
			endProblems = append(endProblems, fmt.Sprintf("stream %s: on_end trapped", s.name))
		}
	}
	if ph&wasmhost.PhaseChunk != 0 {
		c.add(verdictResult("phases.chunk", chunkProblems, ran, "streams",
			"on_chunk must return CONTINUE, HOLD, RELEASE, REPLACE, STOP or FAIL (or PAUSE after dispatching a call) and not trap (ABI.md, Verdicts)"))
	}
	if ph&wasmhost.PhaseEnd != 0 {
		c.add(verdictResult("phases.end", endProblems, ran, "streams", "on_end must not trap (ABI.md, Guest exports)"))
	}
}

// defaultProbe is the request a stream of the battery answers.
func defaultProbe() probe {
	return probe{name: "chat", endpoint: "chat/completions", messages: 1,
		body: `{"model":"conformance-model","stream":true,"messages":[{"role":"user","content":"Tell me something."}]}`}
}

// requestBattery runs each request through the request phase and, when
// it passes, the response_headers phase with a 200 and a 500.
func (c *checker) requestBattery(pl *wasmhost.Pipeline) (req, hdr Result) {
	var reqProblems, hdrProblems []string
	var rejected, failed int
	ps := requests(c.words)
	for _, p := range ps {
		r := newRequest(p)
		start := time.Now()
		err := pl.Request(r)
		c.timed(time.Since(start))
		var rej *wasmhost.RejectError
		switch {
		case errors.As(err, &rej):
			rejected++
		case failure(err):
			c.overran["request "+p.name] = true
		case failVerdict(err):
			failed++ // the plugin left it to on_error
		case err != nil:
			reqProblems = append(reqProblems, fmt.Sprintf("request %s: %v", p.name, err))
		default:
			answered(r)
			for _, status := range []int{200, 500} {
				start := time.Now()
				err := pl.ResponseHeaders(r, status)
				c.timed(time.Since(start))
				if failure(err) {
					c.overran["response_headers "+p.name] = true
				} else if err != nil && !errors.As(err, &rej) && !failVerdict(err) {
					hdrProblems = append(hdrProblems, fmt.Sprintf("request %s, status %d: %v", p.name, status, err))
				}
			}
		}
		wasmhost.ReleaseRequest(r)
	}
	req = verdictResult("phases.request", reqProblems, len(ps), "requests",
		"on_request must return CONTINUE, REJECT or FAIL (or PAUSE or DEFER after dispatching a call) and not trap (ABI.md, Verdicts)")
	if req.OK {
		req.Detail += fmt.Sprintf(", %d rejected", rejected)
		if failed > 0 {
			req.Detail += fmt.Sprintf(", %d failed by the plugin (FAIL)", failed)
		}
	}
	hdr = verdictResult("phases.response_headers", hdrProblems, len(ps), "requests",
		"on_response_headers must return CONTINUE, REJECT or FAIL (or PAUSE after dispatching a call) and not trap (ABI.md, Verdicts)")
	return req, hdr
}

func verdictResult(name string, problems []string, n int, what, must string) Result {
	if len(problems) == 0 {
		return pass(name, "%d %s", n, what)
	}
	failed, more := len(problems), ""
	if len(problems) > 3 {
		more = fmt.Sprintf(" (and %d more)", len(problems)-3)
		problems = problems[:3]
	}
	return fail(name, "%d of %d %s failed: %s%s; %s", failed, n, what, strings.Join(problems, "; "), more, must)
}

// timed notes one callback's duration.
func (c *checker) timed(d time.Duration) { c.slowest = max(c.slowest, d) }

// note keeps what a stream run says about the limits.
func (c *checker) note(sr *streamRun) {
	if sr.chunks > 0 {
		c.timed(sr.slowest)
	}
	if failure(sr.out.err) || sr.endOverran {
		c.overran[sr.s.name] = true
	}
}

// trimLoadError drops the host's "plugin "name": " prefix.
func trimLoadError(msg string) string {
	return strings.TrimPrefix(msg, `plugin "plugin": `)
}
