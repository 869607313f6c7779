package proxy

import (
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// router maps a request's model to an upstream: exact names first, then glob
// patterns in policy order. It is immutable once built.
type router struct {
	exact    map[string]*upstream.Client
	patterns []pattern
	// models is the GET /v1/models body: the exact names, OpenAI list format.
	models []byte
}

type pattern struct {
	glob   string
	client *upstream.Client
}

func newRouter(p *config.Policy, clients map[string]*upstream.Client, created time.Time) *router {
	r := &router{exact: make(map[string]*upstream.Client)}
	var names []string
	for _, rt := range p.Routes {
		c := clients[rt.Upstream]
		for _, m := range rt.Models {
			if isGlob(m) {
				r.patterns = append(r.patterns, pattern{glob: m, client: c})
				continue
			}
			r.exact[m] = c
			names = append(names, m)
		}
	}
	sort.Strings(names)
	r.models = appendModelList(nil, names, created)
	return r
}

func isGlob(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// lookup returns the upstream for model, or nil when no route matches.
func (r *router) lookup(model []byte) *upstream.Client {
	if c, ok := r.exact[string(model)]; ok {
		return c
	}
	if len(r.patterns) == 0 {
		return nil
	}
	m := string(model)
	for _, p := range r.patterns {
		if ok, _ := path.Match(p.glob, m); ok {
			return p.client
		}
	}
	return nil
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
