package main

import (
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/sdk"
	"github.com/tollgate/tollgate/sdk/abi"
)

// Actions of dispatched calls:
//
//	pause                            verdict PAUSE
//	defer                            verdict DEFER
//	fail                             verdict FAIL
//	dispatch:<service>=<request>     dispatch a call; an error is appended to the fact
//	                                 "dispatch_errors" as "<service>:<error>;"
//	dispatch_n:<n>:<service>         dispatch n calls of service with request "<i>"
//	dispatch_http:<url>              DispatchHTTP a POST of "hello" to url with X-Test: 1,
//	                                 cached for a minute under "k"
//	expect:<prefix>                  ExpectResponse(the last call dispatched, prefix); an error is
//	                                 appended to "dispatch_errors" as "expect:<error>;"
//	expect_id:<id>=<prefix>          ExpectResponse(id, prefix), the same way
//	record_response                  on_call_response: append "<id>:<status>:<body>:<X-Test header>;"
//	                                 to the fact "responses"
//	record:<text>                    append "<text>;" to the fact "responses" (to see what ran
//	                                 between the responses)
//	pause_until:<n>                  on_call_response: PAUSE while fewer than n responses are
//	                                 recorded, else CONTINUE

// lastCall is the id of the last call dispatched (expect).
var lastCall sdk.CallID

// dispatchAction runs a's action if it is one of the above, returning the
// verdict v becomes.
func dispatchAction(name, arg string, e *env, v sdk.Verdict) (sdk.Verdict, bool) {
	switch name {
	case "pause":
		return sdk.Pause, true
	case "defer":
		return sdk.Verdict(abi.Defer), true
	case "fail":
		return sdk.Fail, true
	case "dispatch":
		svc, req, _ := strings.Cut(arg, "=")
		id, err := sdk.Dispatch(svc, []byte(req))
		lastCall = id
		dispatchError(e, svc, err)
	case "expect":
		dispatchError(e, "expect", sdk.ExpectResponse(lastCall, arg))
	case "expect_id":
		id, prefix, _ := strings.Cut(arg, "=")
		n, _ := strconv.Atoi(id)
		dispatchError(e, "expect", sdk.ExpectResponse(sdk.CallID(n), prefix))
	case "dispatch_n":
		n, svc, _ := strings.Cut(arg, ":")
		k, _ := strconv.Atoi(n)
		for i := range k {
			_, err := sdk.Dispatch(svc, []byte(strconv.Itoa(i)))
			dispatchError(e, svc, err)
		}
	case "dispatch_http":
		_, err := sdk.DispatchHTTP(sdk.HTTPRequest{Method: "POST", URL: arg, Header: [][2]string{{"X-Test", "1"}},
			Body: []byte("hello"), CacheKey: "k", CacheTTL: 60e9})
		dispatchError(e, "http", err)
	case "record_response":
		c := e.cr
		h, _ := c.Header("X-Test")
		prev, _ := e.x.Fact("responses")
		rec := strconv.Itoa(int(c.ID())) + ":" + strconv.Itoa(c.Status()) + ":" + string(c.Body()) + ":" + h + ";"
		check(e.x.SetFact("responses", prev+rec))
	case "record":
		prev, _ := e.x.Fact("responses")
		check(e.x.SetFact("responses", prev+arg+";"))
	case "pause_until":
		n, _ := strconv.Atoi(arg)
		prev, _ := e.x.Fact("responses")
		if strings.Count(prev, ";") < n {
			return sdk.Pause, true
		}
		return sdk.Continue, true
	default:
		return v, false
	}
	return v, true
}

func dispatchError(e *env, svc string, err error) {
	if err == nil {
		return
	}
	prev, _ := e.x.Fact("dispatch_errors")
	check(e.x.SetFact("dispatch_errors", prev+svc+":"+err.Error()+";"))
}

// onCallResponse runs the call_response actions in the dispatching
// phase's view.
func onCallResponse(c *sdk.CallResponse) sdk.Verdict {
	return run(cfg.CallResponse, &env{x: &c.Exchange, req: c.Request(), resp: c.Response(), chunk: c.Chunk(), end: c.End(), cr: c})
}
