// Package config decodes, validates and holds a Tollgate policy: the YAML file
// that declares the listener, the upstreams and the routes from model names to
// upstreams.
//
// A policy is decoded strictly (unknown keys are errors), every problem is
// reported with its YAML path, and the result is treated as immutable: a
// reload builds a new Policy and swaps it.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/builtin"
	"github.com/tollgate/tollgate/gateway/internal/tenantspec"
)

// Version is the policy format this build reads.
const Version = 1

// Provider kinds an upstream may speak.
const (
	// ProviderOpenAI is the OpenAI API and servers compatible with it
	// (vLLM, Ollama, ...): requests pass as the client sent them.
	ProviderOpenAI = "openai"
	// ProviderAnthropic is Anthropic's Messages API: OpenAI-style chat
	// requests are translated, and POST /v1/messages passes through.
	ProviderAnthropic = "anthropic"
	// ProviderAzure is Azure OpenAI: OpenAI's wire format on deployment
	// paths, with an api-key or an Entra ID token (azure.go).
	ProviderAzure = "azure"
	// ProviderBedrock is AWS Bedrock's Converse API, SigV4-signed.
	ProviderBedrock = "bedrock"
	// ProviderGemini is Google's Gemini API (AI Studio key).
	ProviderGemini = "gemini"
	// ProviderVertex is Gemini on Google Cloud's Vertex AI (OAuth).
	ProviderVertex = "vertex"
)

// Policy is a decoded and validated policy file.
type Policy struct {
	// Version is the policy format: 1 (see the Version constant).
	Version   int        `yaml:"version"`
	Server    Server     `yaml:"server"`
	Upstreams []Upstream `yaml:"upstreams"`
	Routes    []Route    `yaml:"routes"`
	// Admin is the admin API's listener (tenants, plans, keys, prices).
	Admin Admin `yaml:"admin"`
	// Store selects where tenants, keys, plans and prices come from.
	Store Store `yaml:"store"`
	// Tenants is the memory store's data (store.kind: memory).
	Tenants tenantspec.Config `yaml:"tenants"`
	// Pricing is the price catalog and what an unpriced model means.
	Pricing Pricing `yaml:"pricing"`
	// Plugins run in this order in every phase they take part in.
	Plugins []Plugin `yaml:"plugins"`
	// Chains are named selections of the plugins that routes refer to
	// (routes[].plugins: NAME): each a list of plugin names, in the order
	// of plugins.
	Chains        map[string][]string `yaml:"chains"`
	PluginRuntime PluginRuntime       `yaml:"plugin_runtime"`
	// Redis is shared by replicas for rate limits and budget counters.
	Redis Redis `yaml:"redis"`
	// CallLog is the ledger writer (with the Postgres store).
	CallLog CallLog `yaml:"call_log"`
	// Tracing exports OpenTelemetry spans (off by default).
	Tracing Tracing `yaml:"tracing"`
	// Metrics says where Prometheus /metrics is served (default: the
	// admin listener) and caps its tenant label.
	Metrics Metrics `yaml:"metrics"`
	// Alerts delivers budget alerts to a webhook (off by default).
	Alerts Alerts `yaml:"alerts"`
	// Passthrough configures the endpoints passed through without a
	// model to route by: the Files and Batch APIs (docs/POLICY.md,
	// "Passthrough endpoints").
	Passthrough Passthrough `yaml:"passthrough"`
	// Cache is the response cache's store (docs/POLICY.md, "Response
	// cache").
	Cache Cache `yaml:"cache"`
	// MCP lists the Model Context Protocol servers the gateway fronts
	// (docs/POLICY.md, "MCP servers").
	MCP MCP `yaml:"mcp"`

	// Dir is the directory of the policy file; relative plugin paths are
	// resolved against it ("" for a policy that is not a file: the working
	// directory).
	Dir string `yaml:"-"`
}

// Admin configures the admin API. It runs on its own listener, with its own
// token, and only with the Postgres store (the memory store is the policy).
type Admin struct {
	// Listen is the admin listener's address; empty disables the admin
	// API. Keep it on loopback or a private network.
	Listen string `yaml:"listen"`
	// TokenEnv names the environment variable holding the admin token
	// (default TOLLGATE_ADMIN_TOKEN). Without a token every call is refused.
	TokenEnv string `yaml:"token_env"`

	// TLS serves the admin API over TLS, with optional mutual TLS
	// (absent: plain TCP).
	TLS *AdminTLS `yaml:"tls"`

	Token string `yaml:"-"` // resolved from TokenEnv; never logged
}

// Store kinds.
const (
	StoreMemory   = "memory"
	StorePostgres = "postgres"
)

// Store configures the tenant store and its cache.
type Store struct {
	// Kind is memory (default: the policy's tenants section) or postgres.
	Kind     string        `yaml:"kind"`
	Postgres PostgresStore `yaml:"postgres"`
	Cache    TenantCache   `yaml:"cache"`
}

// PostgresStore locates the database.
type PostgresStore struct {
	// DSNEnv names the environment variable holding the connection string
	// (default TOLLGATE_DATABASE_URL); the DSN itself is never written in
	// the policy.
	DSNEnv string `yaml:"dsn_env"`
	// MaxConns is the pool size per gateway process (default: pgx's).
	MaxConns int32 `yaml:"max_conns"`

	DSN string `yaml:"-"` // resolved from DSNEnv
}

// TenantCache configures the read-through cache in front of the store.
type TenantCache struct {
	// TTL is how long a key's snapshot is fresh (default 3s, at most 30s);
	// 0s reads the store on every request.
	TTL *time.Duration `yaml:"ttl"`
	// NegativeTTL is how long an unknown key is remembered (default 1s).
	NegativeTTL time.Duration `yaml:"negative_ttl"`
	// MaxEntries caps the cache (default 100000).
	MaxEntries int64 `yaml:"max_entries"`
}

// Plugin is one WebAssembly policy plugin.
type Plugin struct {
	// Name is unique among the plugins; logs, metrics and errors use it.
	Name string `yaml:"name"`
	// Path is the .wasm file, relative to the policy file's directory.
	// Exactly one of Path and Builtin is set.
	Path string `yaml:"path"`
	// Builtin names a plugin built into the binary instead of a file:
	// preflight, ratelimit, budget, holdback, pii, moderation or cache
	// (gateway/internal/builtin).
	Builtin string `yaml:"builtin"`
	// Enabled (default true): false leaves the plugin out of every
	// request unless a plan or tenant switches it on (tenants.plans[].plugins,
	// tenants.tenants[].plugins, or the admin API's plugins field).
	Enabled *bool `yaml:"enabled"`
	// OnError is fail_closed (default: a failed plugin fails the request
	// with a clear error) or fail_open (the failed callback is skipped).
	OnError string       `yaml:"on_error"`
	Limits  PluginLimits `yaml:"limits"`
	// Config is handed to the plugin's on_configure as JSON.
	Config any `yaml:"config"`
	// Callout grants the plugin HTTP call-outs; absent: none.
	Callout *Callout `yaml:"callout"`

	// File is Path resolved; set by validation ("" for a built-in).
	File string `yaml:"-"`
}

// Module returns the plugin's WebAssembly module: the built-in one, or the
// contents of File.
func (pl *Plugin) Module() ([]byte, error) {
	if pl.Builtin != "" {
		return builtin.Module(pl.Builtin)
	}
	return os.ReadFile(pl.File)
}

// PluginLimits bound one plugin. Zero means default.
type PluginLimits struct {
	// Memory caps each instance's linear memory (default 64MiB).
	Memory ByteSize `yaml:"memory"`
	// Deadline bounds one callback (default 250ms).
	Deadline time.Duration `yaml:"deadline"`
	// Instances caps the instance pool (default 2 × CPUs).
	Instances int `yaml:"instances"`
	// Interruptible (default true) compiles termination checks so a
	// callback spinning past its deadline is stopped. false saves about a
	// sixth of a callback's time (preflight, warm: 2.7 instead of 3.2 µs),
	// for measurements: an overdue callback is then only logged and
	// counted.
	Interruptible *bool `yaml:"interruptible"`
}

// PluginRuntime configures the WebAssembly runtime.
type PluginRuntime struct {
	// CacheDir holds compiled plugin code across restarts (default: the
	// user cache directory, tollgate/wazero).
	CacheDir string `yaml:"cache_dir"`
}

// Plugin failure modes.
const (
	FailClosed = "fail_closed"
	FailOpen   = "fail_open"
)

// Server configures the public listener.
type Server struct {
	// Listen is the address of the public listener (default 127.0.0.1:8080).
	Listen string `yaml:"listen"`
	// MaxBodyBytes caps a request body; larger bodies get 413 (default 4 MiB).
	MaxBodyBytes ByteSize `yaml:"max_body_bytes"`
	// DrainTimeout bounds how long open streams may run after SIGTERM
	// (default: the longest upstreams[].timeouts.total, at least 30s).
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// ReadTimeout bounds reading one request, headers and body (default 30s).
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// IdleTimeout closes keep-alive client connections idle this long
	// (default 90s).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConnections caps concurrent client connections (default 10000).
	MaxConnections int `yaml:"max_connections"`
	// CancelPollInterval is how often each gateway asks Redis for cancels
	// of the requests it is serving (POST /v1/requests/{id}/cancel on any
	// replica); one script call per interval, none while idle (default
	// 500ms).
	CancelPollInterval time.Duration `yaml:"cancel_poll_interval"`
	// AccessLog writes one structured line per request (request id,
	// tenant, model, upstream, status, timings, tokens, cost, guard
	// action; never prompt or reply text) to the gateway's log, after the
	// reply is out (default false).
	AccessLog bool `yaml:"access_log"`
	// EndUserHeader names the request header that says which end user of
	// the tenant a request is for (default X-Tollgate-End-User); without
	// it the body's "user", else its "safety_identifier", names them. The
	// end user is recorded in the call log and held against the plan's
	// user budgets; a request naming none has no user budget.
	EndUserHeader string `yaml:"end_user_header"`
	// TLS serves the public listener over TLS (absent: plain TCP).
	TLS *ServerTLS `yaml:"tls"`
}

// DefaultEndUserHeader is Server.EndUserHeader's default.
const DefaultEndUserHeader = "X-Tollgate-End-User"

// Upstream is one model server the gateway forwards to.
type Upstream struct {
	// Name is unique among the upstreams; routes refer to it.
	Name string `yaml:"name"`
	// Provider is the API the upstream speaks: openai (the default: OpenAI
	// and compatible servers), anthropic (Anthropic's Messages API),
	// azure, bedrock, gemini or vertex (see docs/POLICY.md, Providers).
	Provider string `yaml:"provider"`
	// BaseURL is the API root including its version path, e.g.
	// https://api.openai.com/v1; the gateway appends /chat/completions etc.
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding the upstream's API
	// key. The key itself never appears in the policy.
	APIKeyEnv string `yaml:"api_key_env"`
	// Timeouts bound each phase of an upstream exchange.
	Timeouts Timeouts `yaml:"timeouts"`
	// MaxConnections caps connections to this upstream; idle ones are kept
	// alive for reuse (default 512).
	MaxConnections int `yaml:"max_connections"`
	// MaxConcurrent caps the requests in flight to this upstream, a stream
	// counting until it ends (0, the default: no cap). When every upstream
	// of a route is at its cap a request waits for a slot, at most the
	// first_byte timeout.
	MaxConcurrent int `yaml:"max_concurrent"`
	// Breaker, when set, stops sending requests to this upstream for a
	// while after consecutive failures (nil: no breaker).
	Breaker *Breaker `yaml:"breaker"`
	// Headers are added to every request sent to this upstream.
	Headers map[string]string `yaml:"headers"`
	// ForwardHeaders lists the client request headers passed on to this
	// upstream, as case-insensitive names or glob patterns ("x-mock-*").
	// Content-Type, Accept, User-Agent and OpenAI-Beta always pass; nothing
	// else does unless listed (client credentials never do).
	ForwardHeaders []string `yaml:"forward_headers"`
	// AnthropicVersion is the anthropic-version header sent to an
	// anthropic upstream (default 2023-06-01); on POST /v1/messages the
	// client's own anthropic-version wins. Only for provider anthropic.
	AnthropicVersion string `yaml:"anthropic_version"`
	// Azure, Bedrock and Vertex are their providers' settings (only for
	// that provider; upstream_providers.go).
	Azure   *Azure   `yaml:"azure"`
	Bedrock *Bedrock `yaml:"bedrock"`
	Vertex  *Vertex  `yaml:"vertex"`
	// ModelIDs maps a client's model name to the name sent to this
	// upstream (an Azure deployment, a Bedrock model id, a Gemini model).
	// A model not listed goes as it is. Clients, the call log and the
	// metrics keep the client's name.
	ModelIDs map[string]string `yaml:"model_ids"`

	// APIKey is resolved from APIKeyEnv at load; never logged.
	APIKey string `yaml:"-"`
	// URL is BaseURL parsed.
	URL *url.URL `yaml:"-"`
}

// Timeouts bound the phases of one upstream exchange. Zero means default.
type Timeouts struct {
	// Connect bounds dialing, TLS included (default 5s).
	Connect time.Duration `yaml:"connect"`
	// FirstByte bounds the wait for response headers after the request was
	// sent (default 60s).
	FirstByte time.Duration `yaml:"first_byte"`
	// Idle bounds the silence between two reads of a streamed body
	// (default 60s).
	Idle time.Duration `yaml:"idle"`
	// Total bounds the whole exchange, stream included (default 10m).
	Total time.Duration `yaml:"total"`
}

// Route sends the requests whose model matches one of Models to its
// upstreams (see routing.go).
type Route struct {
	// Models are exact names or path.Match glob patterns ("gpt-4o*").
	// Exact names are listed by GET /v1/models; patterns are not.
	Models []string `yaml:"models"`
	// Upstream names an entry of Policy.Upstreams: the shorthand for
	// Upstreams with that one entry. Validation fills Upstreams from it.
	Upstream string `yaml:"upstream"`
	// Upstreams share the route's requests by weight; a retry prefers one
	// the request has not tried.
	Upstreams []RouteUpstream `yaml:"upstreams"`
	// FallbackModels are tried in order once every upstream of the route
	// failed or is unavailable: each is a model name another route (or
	// this one) serves, sent with the request's model replaced. A
	// fallback's own fallbacks are not followed.
	FallbackModels []string `yaml:"fallback_models"`
	// Retry bounds the attempts of a request on this route.
	Retry Retry `yaml:"retry"`
	// Plugins are the plugins the route's requests run: the name of an
	// entry of chains, or a list of plugin names (default: every plugin).
	// Either way they run in the order of the policy's plugins; a plan
	// or tenant may switch plugins of the route's selection on or off.
	Plugins *PluginSelection `yaml:"plugins"`

	// PluginNames is Plugins resolved by validation: nil for every
	// plugin, else the names of the route's plugins (empty for none).
	PluginNames []string `yaml:"-"`
}

// Defaults for fields left zero.
const (
	DefaultListen             = "127.0.0.1:8080"
	DefaultMaxBodyBytes       = 4 << 20
	DefaultDrainTimeout       = 30 * time.Second
	DefaultReadTimeout        = 30 * time.Second
	DefaultIdleTimeout        = 90 * time.Second
	DefaultServerConnections  = 10000
	DefaultCancelPollInterval = 500 * time.Millisecond
	DefaultConnectTimeout     = 5 * time.Second
	DefaultFirstByteTimeout   = 60 * time.Second
	DefaultIdleTimeoutStream  = 60 * time.Second
	DefaultTotalTimeout       = 10 * time.Minute
	DefaultUpstreamConns      = 512
)

func (p *Policy) applyDefaults() {
	s := &p.Server
	setDefault(&s.Listen, DefaultListen)
	setDefault(&s.MaxBodyBytes, DefaultMaxBodyBytes)
	setDefault(&s.EndUserHeader, DefaultEndUserHeader)
	setDefault(&s.ReadTimeout, DefaultReadTimeout)
	setDefault(&s.IdleTimeout, DefaultIdleTimeout)
	setDefault(&s.MaxConnections, DefaultServerConnections)
	setDefault(&s.CancelPollInterval, DefaultCancelPollInterval)
	p.applyTLSDefaults()
	for i := range p.Upstreams {
		u := &p.Upstreams[i]
		setDefault(&u.Provider, ProviderOpenAI)
		setDefault(&u.Timeouts.Connect, DefaultConnectTimeout)
		setDefault(&u.Timeouts.FirstByte, DefaultFirstByteTimeout)
		setDefault(&u.Timeouts.Idle, DefaultIdleTimeoutStream)
		setDefault(&u.Timeouts.Total, DefaultTotalTimeout)
		setDefault(&u.MaxConnections, DefaultUpstreamConns)
	}
	if s.DrainTimeout == 0 {
		// Unset, the drain lets the longest stream the upstreams allow
		// finish (a drain ends as soon as nothing is in flight, and a
		// second signal ends it at once), so a rolling deploy cuts none.
		s.DrainTimeout, _ = p.LongestStream()
		s.DrainTimeout = max(s.DrainTimeout, DefaultDrainTimeout)
	}
	for i := range p.Plugins {
		setDefault(&p.Plugins[i].OnError, FailClosed)
		if c := p.Plugins[i].Callout; c != nil {
			c.applyDefaults()
		}
	}
	setDefault(&p.Store.Kind, StoreMemory)
	setDefault(&p.Admin.TokenEnv, "TOLLGATE_ADMIN_TOKEN")
	setDefault(&p.Store.Postgres.DSNEnv, "TOLLGATE_DATABASE_URL")
	p.applySharedDefaults()
	p.applyAlertsDefaults()
	p.applyCacheDefaults()
	p.applyMCPDefaults()
	p.applyRoutingDefaults()
}

// httpToken reports whether s is a non-empty RFC 9110 token, the syntax of
// a header name.
func httpToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Problems collects every validation problem of a policy, each with its
// YAML path.
type Problems []Problem

// Problem is one invalid value.
type Problem struct {
	Path    string // e.g. "upstreams[1].base_url"
	Line    int    // 1-based line in the file, 0 when unknown
	Message string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s (line %d): %s", p.Path, p.Line, p.Message)
	}
	return fmt.Sprintf("%s: %s", p.Path, p.Message)
}

// Error lists all problems, one per line.
func (ps Problems) Error() string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

func (ps *Problems) add(path, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// validate checks everything a running gateway would trip over later.
// lookupEnv resolves api_key_env.
func (p *Policy) validate(lookupEnv func(string) (string, bool)) Problems {
	var ps Problems
	if p.Version != Version {
		ps.add("version", "must be %d (this build reads policy version %d), got %d", Version, Version, p.Version)
	}
	if p.Server.MaxBodyBytes < 0 {
		ps.add("server.max_body_bytes", "must not be negative")
	}
	if h := p.Server.EndUserHeader; !httpToken(h) {
		ps.add("server.end_user_header", "must be a header name (letters, digits and !#$%%&'*+-.^_`|~), got %q", h)
	}
	for _, d := range []struct {
		path string
		v    time.Duration
	}{
		{"server.drain_timeout", p.Server.DrainTimeout},
		{"server.read_timeout", p.Server.ReadTimeout},
		{"server.idle_timeout", p.Server.IdleTimeout},
	} {
		if d.v < 0 {
			ps.add(d.path, "must not be negative")
		}
	}
	if p.Server.MaxConnections < 0 {
		ps.add("server.max_connections", "must not be negative")
	}
	if d := p.Server.CancelPollInterval; d < 10*time.Millisecond || d > time.Minute {
		ps.add("server.cancel_poll_interval", "must be between 10ms and 1m, got %s", d)
	}
	names := make(map[string]int, len(p.Upstreams))
	if len(p.Upstreams) == 0 {
		ps.add("upstreams", "at least one upstream is required")
	}
	for i := range p.Upstreams {
		p.Upstreams[i].validate(fmt.Sprintf("upstreams[%d]", i), names, i, lookupEnv, &ps)
	}
	if len(p.Routes) == 0 {
		ps.add("routes", "at least one route is required")
	}
	p.validatePlugins(lookupEnv, &ps)
	p.validateStore(lookupEnv, &ps)
	p.validateShared(lookupEnv, &ps)
	p.validatePassthrough(&ps)
	p.validateAlerts(lookupEnv, &ps)
	p.validateCache(&ps)
	p.validateMCP(&ps)
	p.validatePricing(&ps)
	p.validateTLS(&ps)
	p.validateMetrics(lookupEnv, &ps)
	p.Admin.Token, _ = lookupEnv(p.Admin.TokenEnv)
	if p.Admin.Listen != "" && p.Admin.Token == "" {
		ps.add("admin.token_env", "environment variable %s is not set: the admin API needs a token", p.Admin.TokenEnv)
	}
	seen := make(map[string]string)
	for i, r := range p.Routes {
		at := fmt.Sprintf("routes[%d]", i)
		if len(r.Models) == 0 {
			ps.add(at+".models", "at least one model name or pattern is required")
		}
		for j, m := range r.Models {
			mp := fmt.Sprintf("%s.models[%d]", at, j)
			if m == "" {
				ps.add(mp, "must not be empty")
				continue
			}
			if _, err := path.Match(m, ""); err != nil {
				ps.add(mp, "invalid glob pattern %q: %v", m, err)
			}
			if prev, dup := seen[m]; dup {
				ps.add(mp, "%q is already routed by %s", m, prev)
			}
			seen[m] = mp
		}
		p.validateRouteTargets(i, names, &ps)
	}
	p.validateFallbacks(&ps)
	p.validateChains(&ps)
	return ps
}

func (u *Upstream) validate(at string, names map[string]int, i int, lookupEnv func(string) (string, bool), ps *Problems) {
	if u.Name == "" {
		ps.add(at+".name", "is required")
	} else if j, dup := names[u.Name]; dup {
		ps.add(at+".name", "%q is already used by upstreams[%d]", u.Name, j)
	} else {
		names[u.Name] = i
	}
	u.validateProvider(at, ps)
	switch parsed, err := url.Parse(u.BaseURL); {
	case u.BaseURL == "":
		ps.add(at+".base_url", "is required")
	case err != nil:
		ps.add(at+".base_url", "not a URL: %v", err)
	case parsed.Scheme != "http" && parsed.Scheme != "https":
		ps.add(at+".base_url", "scheme must be http or https, got %q", parsed.Scheme)
	case parsed.Host == "":
		ps.add(at+".base_url", "has no host")
	case parsed.RawQuery != "" || parsed.Fragment != "" || parsed.User != nil:
		ps.add(at+".base_url", "must not carry a query, fragment or user info")
	default:
		parsed.Path = strings.TrimSuffix(parsed.Path, "/")
		u.URL = parsed
	}
	if u.APIKeyEnv != "" {
		v, ok := lookupEnv(u.APIKeyEnv)
		switch {
		case !ok || v == "":
			ps.add(at+".api_key_env", "environment variable %s is not set", u.APIKeyEnv)
		case strings.ContainsAny(v, "\r\n\x00"):
			ps.add(at+".api_key_env", "the value of %s contains CR, LF or NUL", u.APIKeyEnv)
		}
		u.APIKey = v
	}
	t := u.Timeouts
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"connect", t.Connect}, {"first_byte", t.FirstByte}, {"idle", t.Idle}, {"total", t.Total}} {
		if d.v < 0 {
			ps.add(at+".timeouts."+d.name, "must not be negative")
		}
	}
	if t.Total > 0 && t.FirstByte > t.Total {
		ps.add(at+".timeouts.first_byte", "(%s) exceeds timeouts.total (%s)", t.FirstByte, t.Total)
	}
	if u.MaxConnections < 0 {
		ps.add(at+".max_connections", "must not be negative")
	}
	u.validateResilience(at, ps)
	for i, h := range u.ForwardHeaders {
		if _, err := path.Match(h, ""); err != nil || h == "" {
			ps.add(fmt.Sprintf("%s.forward_headers[%d]", at, i), "invalid header name or pattern %q", h)
		}
	}
	for k, v := range u.Headers {
		if !validHeaderName(k) {
			ps.add(at+".headers", "invalid header name %q", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			ps.add(at+".headers."+k, "value must not contain CR, LF or NUL")
		}
	}
}

func (p *Policy) validatePlugins(lookupEnv func(string) (string, bool), ps *Problems) {
	names := map[string]int{}
	for i := range p.Plugins {
		pl := &p.Plugins[i]
		at := fmt.Sprintf("plugins[%d]", i)
		if pl.Name == "" {
			ps.add(at+".name", "is required")
		} else if j, dup := names[pl.Name]; dup {
			ps.add(at+".name", "%q is already used by plugins[%d]", pl.Name, j)
		} else {
			names[pl.Name] = i
		}
		if pl.OnError != FailClosed && pl.OnError != FailOpen {
			ps.add(at+".on_error", "must be %s or %s, got %q", FailClosed, FailOpen, pl.OnError)
		}
		p.resolveModule(pl, at, ps)
		l := pl.Limits
		if l.Memory < 0 || (l.Memory > 0 && l.Memory < 1<<20) || l.Memory > 4<<30 {
			ps.add(at+".limits.memory", "must be between 1MiB and 4GiB")
		}
		if l.Deadline < 0 {
			ps.add(at+".limits.deadline", "must not be negative")
		}
		if l.Instances < 0 {
			ps.add(at+".limits.instances", "must not be negative")
		}
		if _, err := json.Marshal(pl.Config); err != nil {
			ps.add(at+".config", "cannot be expressed as JSON: %v", err)
		}
		if pl.Callout != nil {
			pl.Callout.validate(at+".callout", lookupEnv, ps)
		}
	}
}

// resolveModule checks where plugin pl (at its YAML path at) comes from:
// a built-in by name, or a .wasm file, which it resolves into pl.File.
func (p *Policy) resolveModule(pl *Plugin, at string, ps *Problems) {
	switch {
	case pl.Path != "" && pl.Builtin != "":
		ps.add(at+".builtin", "cannot be set with path: name a built-in plugin or a .wasm file, not both")
	case pl.Builtin != "":
		if !builtin.Known(pl.Builtin) {
			ps.add(at+".builtin", "unknown built-in plugin %q (built-in: %s)", pl.Builtin, strings.Join(builtin.Names(), ", "))
		}
	case pl.Path == "":
		ps.add(at+".path", "is required (the plugin's .wasm file), or builtin: one of %s", strings.Join(builtin.Names(), ", "))
	default:
		pl.File = pl.Path
		if !filepath.IsAbs(pl.File) && p.Dir != "" {
			pl.File = filepath.Join(p.Dir, pl.File)
		}
		if st, err := os.Stat(pl.File); err != nil {
			ps.add(at+".path", "cannot read %s: %v (build plugins with `make plugins`)", pl.File, errors.Unwrap(err))
		} else if st.IsDir() {
			ps.add(at+".path", "%s is a directory, not a .wasm file", pl.File)
		}
	}
}

func (p *Policy) validateStore(lookupEnv func(string) (string, bool), ps *Problems) {
	st := &p.Store
	switch st.Kind {
	case StoreMemory:
		if _, err := tenantspec.Build(p.Tenants, lookupEnv); err != nil {
			ps.add("tenants", "%v", err)
		}
	case StorePostgres:
		dsn, ok := lookupEnv(st.Postgres.DSNEnv)
		if !ok || dsn == "" {
			ps.add("store.postgres.dsn_env", "environment variable %s is not set (it holds the Postgres connection string)", st.Postgres.DSNEnv)
		}
		st.Postgres.DSN = dsn
		if len(p.Tenants.Tenants)+len(p.Tenants.Plans)+len(p.Tenants.Prices) > 0 {
			ps.add("tenants", "is the memory store's data; with store.kind postgres, manage tenants through the admin API")
		}
	default:
		ps.add("store.kind", "must be %s or %s, got %q", StoreMemory, StorePostgres, st.Kind)
	}
	if st.Postgres.MaxConns < 0 {
		ps.add("store.postgres.max_conns", "must not be negative")
	}
	c := st.Cache
	if c.TTL != nil && (*c.TTL < 0 || *c.TTL > 30*time.Second) {
		ps.add("store.cache.ttl", "must be between 0s (read through every time) and 30s, got %s", *c.TTL)
	}
	if c.NegativeTTL < 0 || c.NegativeTTL > 30*time.Second {
		ps.add("store.cache.negative_ttl", "must be between 0s and 30s")
	}
	if c.MaxEntries < 0 {
		ps.add("store.cache.max_entries", "must not be negative")
	}
}

func declared(us []Upstream) string {
	if len(us) == 0 {
		return "none"
	}
	names := make([]string, 0, len(us))
	for _, u := range us {
		names = append(names, fmt.Sprintf("%q", u.Name))
	}
	return strings.Join(names, ", ")
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
