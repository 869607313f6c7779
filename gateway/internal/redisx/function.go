package redisx

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Library is a Redis Functions library (Redis 7.0 or later): Lua code that
// Redis runs once, at FUNCTION LOAD, to register functions, so that a call
// (FCALL) runs only the function's body. A script (EVALSHA) runs its whole
// text on every call, defining again every local function it holds
// (docs/adr/0020-redis-functions.md).
//
// The library's name and its functions' names end with a hash of its
// code, so gateways of different versions sharing one Redis each call
// their own functions and never replace each other's.
type Library struct {
	name   string // tollgate_<hash>
	suffix string // _<hash>
	code   string // what FUNCTION LOAD takes
}

// NewLibrary returns the library of body, Lua that registers its functions
// by calling register(name, callback): callback(keys, args) is what
// FCALL runs. Function names are made unique per body; see Function.
func NewLibrary(prefix, body string) *Library {
	sum := sha1.Sum([]byte(body))
	hash := hex.EncodeToString(sum[:6])
	l := &Library{name: prefix + "_" + hash, suffix: "_" + hash}
	l.code = "#!lua name=" + l.name + "\n" +
		"local function register(name, callback)\n" +
		"  redis.register_function(name .. '" + l.suffix + "', callback)\n" +
		"end\n" + body
	return l
}

// Name is the library's name in FUNCTION LIST.
func (l *Library) Name() string { return l.name }

// Code is what FUNCTION LOAD takes.
func (l *Library) Code() string { return l.code }

// Function returns the function that body registered as name, for
// Client.FCall.
func (l *Library) Function(name string) *Function {
	return &Function{lib: l, name: name + l.suffix, base: name}
}

// Function is one function of a Library.
type Function struct {
	lib  *Library
	name string
	base string // name without the library's hash: the durations' label
}

// Name is the function's name in Redis.
func (f *Function) Name() string { return f.name }

// FCall calls f (FCALL) within the command timeout. When Redis does not
// know f — a restart, FUNCTION FLUSH, FLUSHALL with functions, a failover
// to a node that never had it, a first call — it loads f's library on
// every node the client knows, once for all callers waiting on the same
// miss, and calls f once more: the functions' counterpart of EVALSHA's
// NOSCRIPT and EVAL. On Redis Cluster a call refused with TRYAGAIN or
// CLUSTERDOWN (Refused: it did not run) is sent again within the timeout.
func (c *Client) FCall(ctx context.Context, f *Function, keys, args []string) rueidis.RedisResult {
	rc, err := c.Raw()
	if err != nil {
		return rueidis.NewErrorResult(err)
	}
	defer since(c.durations.function(f), time.Now())
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	call := func() rueidis.RedisResult {
		c.commands.Add(1)
		return rc.Do(ctx, fcall(rc, f, keys, args))
	}
	res := c.retrying(ctx, call)
	if IsFunctionMissing(res.Error()) {
		if err := c.load(ctx, rc, f.lib); err != nil {
			c.note(err)
			return rueidis.NewErrorResult(err)
		}
		res = c.retrying(ctx, call)
	}
	c.note(res.Error())
	return res
}

func fcall(rc rueidis.Client, f *Function, keys, args []string) rueidis.Completed {
	return rc.B().Fcall().Function(f.name).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// Load loads l now, on every node, so that the first FCALLs find it (a
// gateway calls it once connected, before serving). FCall loads it
// anyway whenever it is missing.
func (c *Client) Load(ctx context.Context, l *Library) error {
	rc, err := c.Raw()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	return c.load(ctx, rc, l)
}

// load loads l on every node of rc (one for a single server; in a cluster
// every node, as the key's slot may move to any of them). Callers that
// miss at the same time share one load. A node that refuses (a replica)
// is skipped: the primary's load reaches it by replication.
func (c *Client) load(ctx context.Context, rc rueidis.Client, l *Library) error {
	_, err, _ := c.loads.Do(l.name, func() (any, error) {
		var first error
		loaded := 0
		for addr, n := range rc.Nodes() {
			c.commands.Add(1)
			err := n.Do(ctx, n.B().FunctionLoad().Replace().FunctionCode(l.code).Build()).Error()
			if err == nil {
				loaded++
			} else if first == nil {
				first = fmt.Errorf("loading Redis library %s on %s: %w", l.name, addr, err)
			}
		}
		if loaded == 0 && first != nil {
			return nil, first
		}
		return nil, nil
	})
	return err
}

// IsFunctionMissing reports whether err is Redis's answer to an FCALL of a
// function it does not have.
func IsFunctionMissing(err error) bool {
	// Redis 7 replies "-ERR Function not found"; rueidis keeps the
	// message, with or without the code depending on the protocol.
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.Contains(re.Error(), "Function not found")
}

// Call is one function call of FCallMulti.
type Call struct {
	F          *Function
	Keys, Args []string
}

// FCallMulti sends calls in one write, in their order, within the command
// timeout, and returns their replies: one round trip for all. Redis runs
// them one after the other in that order, as the calls of one connection
// (on Redis Cluster every call must be in one hash slot). A call Redis
// refused (Refused) or did not know the function of (the library is then
// loaded, as by FCall) is sent again alone, after the others: the caller
// must not need such a call to run before the ones after it, as it did
// not run at all in the first write. The replies are appended to out.
func (c *Client) FCallMulti(ctx context.Context, calls []Call, out []rueidis.RedisResult) []rueidis.RedisResult {
	rc, err := c.Raw()
	if err != nil {
		for range calls {
			out = append(out, rueidis.NewErrorResult(err))
		}
		return out
	}
	if len(calls) > 0 {
		defer since(c.durations.function(calls[len(calls)-1].F), time.Now())
	}
	tctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	cmds := make(rueidis.Commands, len(calls))
	for i, call := range calls {
		cmds[i] = fcall(rc, call.F, call.Keys, call.Args)
	}
	c.commands.Add(int64(len(calls)))
	base := len(out)
	out = append(out, rc.DoMulti(tctx, cmds...)...)
	for i, call := range calls {
		res := out[base+i]
		if err := res.Error(); Refused(err) || IsFunctionMissing(err) {
			res = c.FCall(ctx, call.F, call.Keys, call.Args)
			out[base+i] = res
			continue
		}
		c.note(res.Error())
	}
	return out
}
