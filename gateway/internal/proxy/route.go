package proxy

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/balance"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// router maps a request's model to a route: exact names first, then glob
// patterns in policy order. It is immutable once built.
type router struct {
	exact    map[string]exactRoute
	patterns []pattern
	// models is the GET /v1/models body: the exact names, OpenAI list format.
	models []byte
	// routes are the routes in policy order.
	routes []*route
}

type pattern struct {
	glob  string
	route *route
}

// exactRoute is the route of a model the policy names; name is that
// model's name, kept as the metrics label.
type exactRoute struct {
	route *route
	name  string
}

// route is one policy route: the upstreams that share its requests, the
// fallback models tried when they all fail, and its retry policy. The
// attempt loop (attempt.go) walks it.
type route struct {
	set     *balance.Set
	targets []target // member i of set is targets[i]
	// fallbacks are tried in order once the route's own upstreams failed;
	// their own fallbacks are not followed.
	fallbacks []fallback
	retry     config.Retry
	// wait bounds a request's wait for a slot when every upstream is at
	// its max_concurrent: the longest first_byte timeout among them.
	wait time.Duration
	// chain is the route's plugins (routes[].plugins), compiled for the
	// state's pipeline; nil: every plugin the policy enables.
	chain *wasmhost.Chain
}

// target is one upstream of a route.
type target struct {
	client *upstream.Client
	bind   *binding // how to speak its API (provider.go)
	filter *headerFilter
	name   []byte // the plugins' upstream field; shared, never written
}

type fallback struct {
	model string
	route *route
}

// newRouter builds the routes of p. ups holds each upstream's client and
// health state by name.
func newRouter(p *config.Policy, clients map[string]*upstream.Client, bindings map[string]*binding, filters map[*upstream.Client]*headerFilter,
	health map[string]*balance.Upstream, created time.Time) *router {
	r := &router{exact: make(map[string]exactRoute)}
	timeouts := make(map[string]time.Duration, len(p.Upstreams))
	for _, u := range p.Upstreams {
		timeouts[u.Name] = u.Timeouts.FirstByte
	}
	routes := make([]*route, len(p.Routes))
	var names []string
	for i, rt := range p.Routes {
		members := make([]*balance.Upstream, len(rt.Upstreams))
		weights := make([]int, len(rt.Upstreams))
		ro := &route{retry: rt.Retry, targets: make([]target, len(rt.Upstreams))}
		for j, ru := range rt.Upstreams {
			c := clients[ru.Name]
			members[j], weights[j] = health[ru.Name], ru.Weight
			ro.targets[j] = target{client: c, bind: bindings[ru.Name], filter: filters[c], name: []byte(ru.Name)}
			ro.wait = max(ro.wait, timeouts[ru.Name])
		}
		ro.set = balance.NewSet(members, weights)
		routes[i] = ro
		for _, m := range rt.Models {
			if isGlob(m) {
				r.patterns = append(r.patterns, pattern{glob: m, route: ro})
				continue
			}
			r.exact[m] = exactRoute{route: ro, name: m}
			names = append(names, m)
		}
	}
	// Fallbacks resolve once every route exists (validation made sure each
	// model is routed).
	for i, rt := range p.Routes {
		for _, m := range rt.FallbackModels {
			if fr, _ := r.lookup([]byte(m)); fr != nil {
				routes[i].fallbacks = append(routes[i].fallbacks, fallback{model: m, route: fr})
			}
		}
	}
	sort.Strings(names)
	r.models = appendModelList(nil, names, created)
	r.routes = routes
	return r
}

// bindChains compiles each route's plugin selection for pipe, once per
// policy load; a request takes its route's at its start.
func (r *router) bindChains(p *config.Policy, pipe *wasmhost.Pipeline) error {
	for i, rt := range p.Routes {
		if rt.PluginNames == nil || pipe == nil {
			continue
		}
		c, err := pipe.Chain(rt.PluginNames)
		if err != nil {
			return fmt.Errorf("routes[%d].plugins: %w", i, err)
		}
		r.routes[i].chain = c
	}
	return nil
}

func isGlob(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// lookup returns the route for model, or nil when none matches, and the
// model's label in metrics: the model's name when the policy names it,
// else the pattern it matched ("gpt-*"). Labels come from the policy only,
// so clients cannot add time series by inventing model names.
func (r *router) lookup(model []byte) (*route, string) {
	if e, ok := r.exact[string(model)]; ok {
		return e.route, e.name
	}
	if len(r.patterns) == 0 {
		return nil, ""
	}
	m := string(model)
	for _, p := range r.patterns {
		if ok, _ := path.Match(p.glob, m); ok {
			return p.route, p.glob
		}
	}
	return nil, ""
}

func appendModelList(dst []byte, names []string, created time.Time) []byte {
	dst = append(dst, `{"object":"list","data":[`...)
	for i, n := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"id":`...)
		dst = strconv.AppendQuote(dst, n)
		dst = append(dst, `,"object":"model","created":`...)
		dst = strconv.AppendInt(dst, created.Unix(), 10)
		dst = append(dst, `,"owned_by":"tollgate"}`...)
	}
	return append(dst, "]}"...)
}
