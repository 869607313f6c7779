// Command testplugin is the one configurable plugin the host tests load:
// its config chooses, per phase, what it does, so a test can make it
// continue, reject, hold, replace, stop, trap, spin, exhaust memory or pass
// a wild pointer. It is written with the Go SDK, so it also checks the SDK
// against the host (an ABI conformance plugin).
//
// Build (from the repository root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o testplugin.wasm ./gateway/wasm/testdata/testplugin
//
// Config (every key optional; unknown keys are refused):
//
//	{
//	  "configure": "continue",            // or "fail", "messages", "dispatch", "trap", "loop", "membomb", "wildptr", "wildbuf"
//	  "request": "continue",              // an action or a list of actions, run in order
//	  "response_headers": "continue",
//	  "chunk": "continue",
//	  "end": "continue",
//	  "call_response": "continue",        // on_call_response's actions (see dispatch.go)
//	  "phases": ["request", "chunk"],     // the phases reported by tollgate_phases (default: all four)
//	  "reject_status": 429, "reject_type": "", "reject_code": "", "reject_message": "...",
//	  "finish_reason": "",                // for stop:
//	  "fail_message": "...",              // for configure "fail"
//	  "metric": "count",                  // the metric count writes in end
//	  "sandbox": {"file": "", "write": "", "env": "", "addr": ""}  // what sandbox tries to reach
//	}
//
// Actions. The verdict is the last verdict action's (default continue);
// the other actions only have side effects.
//
//	continue, hold, release          that verdict
//	reject                           request, response_headers: reject with reject_* (without
//	                                 reject_status, return 1 without calling reject: the host's
//	                                 default 403); elsewhere the raw verdict 1
//	verdict:<n>                      return n as is (to test the host's checks)
//	respond:<status> <body>          request: set the answer (respond), verdict respond
//	respond_event:<data>             request: append an event to the answer (respond_event); a
//	                                 refusal is logged as "respond_event: <error>"
//	replace:<text>                   chunk: emit text, verdict replace
//	replace_upper                    chunk: emit the chunk text upper-cased (ASCII), verdict replace
//	stop:<correction>                chunk: stop with that correction and finish_reason
//	emit:<text>                      chunk: emit text, verdict unchanged
//	messages                         the request's message parts, "INDEX|KIND|ROLE|NAME|TEXT;" each:
//	                                 chunk: emitted, verdict replace; end: log "messages <parts>";
//	                                 request, response_headers: the fact "messages"
//	trap                             panic (the Go runtime exits with code 2)
//	loop                             spin forever without allocating
//	membomb                          allocate 1 MiB blocks until memory runs out
//	wildptr                          log with (ptr, len) = (0xFFFFFF00, 4096): must trap
//	wildbuf                          request_field into buffer (0xFFFFFF00, 4096): must trap
//	set_header:<name>=<value>        request: header sent upstream; response_headers: header to the client
//	set_response_header:<name>=<v>   request, response_headers: header to the client
//	fact_set:<key>=<value>           set a fact
//	fact_copy:<key>                  request, response_headers: response header X-Fact-<key> = the fact
//	                                 (unset when absent); chunk, end: log "fact <key>=<value>" or "fact <key> absent"
//	count                            increment a per-request counter kept with state_get/state_set;
//	                                 in end: metric_add(metric, counter) and log "count <n>"
//	metric:<name>                    metric_add(name, 1)
//	log:<text>                       log text at info
//	skip:<mask>                      skip_phases(mask): 2 response_headers, 4 chunk, 8 end
//	call:<service>                   call service with {}; request, response_headers: response header
//	                                 X-Call-Result = result or error; elsewhere log it
//	sandbox                          try to read the sandbox file, create the write path, list / and .,
//	                                 read the env variable and the environment, dial addr, and stat
//	                                 descriptors 3–31; request, response_headers: response header
//	                                 X-Sandbox = the report (see probeSandbox); elsewhere log it
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/sdk"
)

func main() {} // not run in a c-shared build; init registers the handlers

func init() { sdk.OnConfigure(configure) }

// actions is a phase's list of actions: a string or a list of strings.
type actions []string

func (a *actions) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = actions{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("an action must be a string or a list of strings")
	}
	*a = many
	return nil
}

type config struct {
	Configure       actions      `json:"configure"`
	Request         actions      `json:"request"`
	ResponseHeaders actions      `json:"response_headers"`
	Chunk           actions      `json:"chunk"`
	End             actions      `json:"end"`
	CallResponse    actions      `json:"call_response"`
	Phases          *[]string    `json:"phases"`
	RejectStatus    int          `json:"reject_status"`
	RejectType      string       `json:"reject_type"`
	RejectCode      string       `json:"reject_code"`
	RejectMessage   string       `json:"reject_message"`
	FinishReason    string       `json:"finish_reason"`
	FailMessage     string       `json:"fail_message"`
	Metric          string       `json:"metric"`
	Sandbox         sandboxProbe `json:"sandbox"`
}

var cfg config

func configure(raw []byte) error {
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.DisallowUnknownFields()
	if err := d.Decode(&cfg); err != nil {
		return fmt.Errorf("testplugin config: %v", err)
	}
	if cfg.Metric == "" {
		cfg.Metric = "count"
	}
	for _, a := range cfg.Configure {
		switch a {
		case "continue", "":
		case "fail", "configure_fail":
			if cfg.FailMessage == "" {
				cfg.FailMessage = "testplugin: configure_fail"
			}
			return errors.New(cfg.FailMessage)
		case "dispatch":
			// dispatch is not allowed here: report its error.
			_, err := sdk.Dispatch("svc", nil)
			return fmt.Errorf("testplugin: dispatch: %v", err)
		case "messages":
			// request_messages is not allowed here: report its code.
			return fmt.Errorf("testplugin: request_messages: %d", messagesCode())
		default:
			if !disaster(a) {
				return fmt.Errorf("testplugin config: configure: unknown action %q", a)
			}
		}
	}
	if cfg.CallResponse != nil {
		sdk.OnCallResponse(onCallResponse)
	}
	phases := []string{"request", "response_headers", "chunk", "end"}
	if cfg.Phases != nil {
		phases = *cfg.Phases
	}
	for _, p := range phases {
		switch p {
		case "request":
			sdk.OnRequest(func(r *sdk.Request) sdk.Verdict { return run(cfg.Request, &env{x: &r.Exchange, req: r}) })
		case "response_headers":
			sdk.OnResponseHeaders(func(r *sdk.Response) sdk.Verdict {
				return run(cfg.ResponseHeaders, &env{x: &r.Exchange, resp: r})
			})
		case "chunk":
			sdk.OnChunk(func(c *sdk.Chunk) sdk.Verdict { return run(cfg.Chunk, &env{x: &c.Exchange, chunk: c}) })
		case "end":
			sdk.OnEnd(func(e *sdk.End) { run(cfg.End, &env{x: &e.Exchange, end: e}) })
		default:
			return fmt.Errorf("testplugin config: phases: unknown phase %q", p)
		}
	}
	return nil
}

// env is the callback an action runs in: exactly one of req, resp, chunk
// and end is set.
type env struct {
	x     *sdk.Exchange
	req   *sdk.Request
	resp  *sdk.Response
	chunk *sdk.Chunk
	end   *sdk.End
	cr    *sdk.CallResponse // in on_call_response, besides the phase's view
}

var sink [][]byte // keeps membomb's blocks alive

// disaster runs the actions that never return; false for any other.
func disaster(a string) bool {
	switch a {
	case "trap":
		panic("testplugin: trap")
	case "loop":
		for {
		}
	case "membomb":
		for {
			b := make([]byte, 1<<20)
			b[0], b[len(b)-1] = 1, 1
			sink = append(sink, b)
		}
	case "wildptr":
		wildLog()
	case "wildbuf":
		wildRequestField()
	default:
		return false
	}
	panic("testplugin: " + a + " returned")
}

var upper []byte // replace_upper's reusable buffer

func run(acts actions, e *env) sdk.Verdict {
	v := sdk.Continue
	for _, a := range acts {
		name, arg, _ := strings.Cut(a, ":")
		switch name {
		case "continue", "":
			v = sdk.Continue
		case "hold":
			v = sdk.Hold
		case "release":
			v = sdk.Release
		case "reject":
			switch {
			case cfg.RejectStatus == 0:
				v = sdk.Reject // no reject call: the host's default error
			case e.req != nil:
				v = e.req.Reject(cfg.RejectStatus, cfg.RejectType, cfg.RejectCode, cfg.RejectMessage)
			case e.resp != nil:
				v = e.resp.Reject(cfg.RejectStatus, cfg.RejectType, cfg.RejectCode, cfg.RejectMessage)
			default:
				v = sdk.Reject
			}
		case "respond":
			st, body, _ := strings.Cut(arg, " ")
			n, _ := strconv.Atoi(st)
			v = e.req.Respond(n, []byte(body))
		case "respond_event":
			if err := e.req.RespondEvent([]byte(arg)); err != nil {
				sdk.Log(sdk.LevelInfo, "respond_event: "+err.Error())
			}
		case "verdict":
			n, _ := strconv.Atoi(arg)
			v = sdk.Verdict(n)
		case "replace":
			v = e.chunk.Replace(arg)
		case "replace_upper":
			upper = append(upper[:0], e.chunk.Bytes()...)
			for i, c := range upper {
				if 'a' <= c && c <= 'z' {
					upper[i] = c - 'a' + 'A'
				}
			}
			check(e.chunk.EmitBytes(upper))
			v = sdk.Replace
		case "replace_tool_calls":
			// The text becomes the event's tool-call deltas, one
			// "INDEX|NAME|ARGUMENTS;" each, parsed by the SDK.
			var out []byte
			for _, d := range e.chunk.ToolCallDeltas(nil) {
				out = strconv.AppendInt(out, int64(d.Index), 10)
				out = append(append(append(append(append(out, '|'), d.Name...), '|'), d.Arguments...), ';')
			}
			check(e.chunk.EmitBytes(out))
			v = sdk.Replace
		case "messages":
			// The request's message parts, "INDEX|KIND|ROLE|NAME|TEXT;"
			// each: the chunk's replacement text, else the fact
			// "messages" (end: a log line).
			var out []byte
			for _, p := range e.x.Messages(nil) {
				out = strconv.AppendInt(out, int64(p.Index), 10)
				out = append(append(out, '|'), p.Kind.String()...)
				out = append(append(append(append(append(append(append(out, '|'), p.Role...), '|'), p.Name...), '|'), p.Text...), ';')
			}
			switch {
			case e.chunk != nil:
				check(e.chunk.EmitBytes(out))
				v = sdk.Replace
			case e.end != nil:
				sdk.Log(sdk.LevelInfo, "messages "+string(out))
			default:
				check(e.x.SetFact("messages", string(out)))
			}
		case "stop":
			v = e.chunk.Stop(arg, cfg.FinishReason)
		case "emit":
			check(e.chunk.Emit(arg))
		case "set_header":
			k, val, _ := strings.Cut(arg, "=")
			if e.req != nil {
				check(e.req.SetHeader(k, val))
			} else {
				check(e.resp.SetResponseHeader(k, val))
			}
		case "set_response_header":
			k, val, _ := strings.Cut(arg, "=")
			if e.req != nil {
				check(e.req.SetResponseHeader(k, val))
			} else {
				check(e.resp.SetResponseHeader(k, val))
			}
		case "fact_set":
			k, val, _ := strings.Cut(arg, "=")
			check(e.x.SetFact(k, val))
		case "fact_copy":
			val, ok := e.x.Fact(arg)
			switch {
			case e.req != nil && ok:
				check(e.req.SetResponseHeader("X-Fact-"+arg, val))
			case e.resp != nil && ok:
				check(e.resp.SetResponseHeader("X-Fact-"+arg, val))
			case e.req != nil || e.resp != nil:
			case ok:
				sdk.Log(sdk.LevelInfo, "fact "+arg+"="+val)
			default:
				sdk.Log(sdk.LevelInfo, "fact "+arg+" absent")
			}
		case "count":
			n, _ := strconv.Atoi(string(e.x.State()))
			if e.end != nil {
				check(sdk.MetricAdd(cfg.Metric, int64(n)))
				sdk.Log(sdk.LevelInfo, "count "+strconv.Itoa(n))
				break
			}
			check(e.x.SetState(strconv.AppendInt(nil, int64(n+1), 10)))
		case "skip":
			n, err := strconv.Atoi(arg)
			if err != nil {
				panic("testplugin: skip wants a phase mask: " + arg)
			}
			check(e.x.SkipPhases(sdk.Phases(n)))
		case "metric":
			check(sdk.MetricAdd(arg, 1))
		case "log":
			sdk.Log(sdk.LevelInfo, arg)
		case "sandbox":
			report := probeSandbox(cfg.Sandbox)
			switch {
			case e.req != nil:
				check(e.req.SetResponseHeader("X-Sandbox", report))
			case e.resp != nil:
				check(e.resp.SetResponseHeader("X-Sandbox", report))
			default:
				sdk.Log(sdk.LevelInfo, "sandbox "+report)
			}
		case "call":
			res, err := sdk.Call(arg, []byte("{}"))
			out := string(res)
			if err != nil {
				out = "error: " + err.Error()
			}
			switch {
			case e.req != nil:
				check(e.req.SetResponseHeader("X-Call-Result", out))
			case e.resp != nil:
				check(e.resp.SetResponseHeader("X-Call-Result", out))
			default:
				sdk.Log(sdk.LevelInfo, "call "+arg+": "+out)
			}
		default:
			if nv, ok := dispatchAction(name, arg, e, v); ok {
				v = nv
				break
			}
			if !disaster(a) {
				panic("testplugin: unknown action " + strconv.Quote(a))
			}
		}
	}
	return v
}

// check logs a host function's error at error level: a test that expects
// success can look for it in the log.
func check(err error) {
	if err != nil {
		sdk.Log(sdk.LevelError, "testplugin: "+err.Error())
	}
}
