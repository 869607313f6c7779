// Package admin serves the admin API: plans, tenants, API keys, model prices
// and spend, over net/http with JSON bodies. It is not on the request path;
// it writes through a Store (the Postgres store) and, after each successful
// write, tells the local cache to evict what changed (other replicas learn of
// it from the store's NOTIFY).
//
// Every request needs "Authorization: Bearer <token>" (the environment's
// token or a stored admin token, auth.go) or the session cookie (session.go);
// each route needs a scope (read, write or cancel), and the store records
// every write with its actor in the audit log (audit.go). Errors are
// OpenAI-style bodies: {"error":{"message","type","param","code"}}. Money is
// in US dollars as decimal strings ("12.5"), converted exactly to micros.
package admin

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// Store is what the admin API needs of the tenant store. Errors wrap
// tenant.ErrNotFound, pg.ErrExists or pg.ErrInvalid where they are those.
type Store interface {
	CreatePlan(ctx context.Context, p tenant.Plan) error
	UpdatePlan(ctx context.Context, p tenant.Plan) error
	CreateTenant(ctx context.Context, t tenant.Tenant) error
	SetTenantStatus(ctx context.Context, id, status string) error
	CreateKey(ctx context.Context, tenantID string, opts pg.KeyOptions) (string, *tenant.Key, error)
	RevokeKeyHash(ctx context.Context, keyID string) (tenant.KeyHash, error)
	ListKeys(ctx context.Context, tenantID string) ([]tenant.Key, error)
	SetPrice(ctx context.Context, p tenant.Price) error
	MonthUsage(ctx context.Context, tenantID string, month time.Time) (int64, error)
	TenantBudget(ctx context.Context, tenantID string) (int64, error)
	PluginStore
	ResourceStore
}

// BudgetCounter is the fast budget counter (Redis or in-process): what is
// spent and held right now in a budget scope.
type BudgetCounter interface {
	Status(ctx context.Context, tenant string, s budget.Scope) (spent, reserved int64, err error)
}

// Option tunes the handler.
type Option func(*handler)

// WithCanceller serves POST /v1/admin/requests/{id}/cancel: cancel reports
// whether a request with that id was in flight (on any replica).
func WithCanceller(cancel func(ctx context.Context, id string) (bool, error)) Option {
	return func(h *handler) { h.cancel = cancel }
}

// WithBudget makes the usage route report the counter's spend and holds
// beside the ledger's.
func WithBudget(b BudgetCounter) Option { return func(h *handler) { h.budget = b } }

var _ Store = (*pg.Store)(nil)

// Evictor drops cached entries. The handler calls it after every successful
// write, so that the replica serving the write evicts at once rather than
// when the store's notification arrives.
type Evictor interface {
	EvictKey(tenant.KeyHash)
	EvictTenant(id string)
	EvictPlan(id string)
	EvictPrice(model string)
}

// maxBody caps request bodies; admin bodies are a few hundred bytes.
const maxBody = 1 << 20

// handler serves the admin API.
type handler struct {
	store  Store
	evict  Evictor
	token  [sha256.Size]byte // SHA-256 of the admin token
	noAuth bool              // no token configured: every call is refused
	log    *slog.Logger
	mux    *http.ServeMux
	now    func() time.Time
	budget BudgetCounter // nil: the ledger only
	prices PriceReader   // nil: GET prices answers 404
	cancel func(ctx context.Context, id string) (bool, error)
	// checkPlugins checks plugin overrides before they are stored (nil:
	// not checked).
	checkPlugins PluginChecker
	tokens       TokenStore        // nil: the environment's token only
	audit        AuditReader       // nil: an empty audit log
	inflight     InflightLister    // nil: GET requests answers 501
	policy       func() PolicyInfo // nil: GET policy answers the store kind only
	// readOnly: the store is the policy file (memory); writes answer 501.
	readOnly bool
}

// NewHandler returns the admin API. token is the environment's admin token
// (actor "bootstrap", every scope); an empty token refuses every request
// with 503. Stored admin tokens are accepted too if store is a TokenStore
// (or WithTokens gives one). A nil evict evicts nothing locally; a nil log
// means slog.Default(). The handler never logs tokens or keys.
func NewHandler(store Store, evict Evictor, token string, log *slog.Logger, opts ...Option) http.Handler {
	if evict == nil {
		evict = noEvict{}
	}
	if log == nil {
		log = slog.Default()
	}
	h := &handler{store: store, evict: evict, token: sha256.Sum256([]byte(token)), noAuth: token == "",
		log: log.With("component", "admin"), now: time.Now}
	for _, o := range opts {
		o(h)
	}
	if ts, ok := store.(TokenStore); ok && h.tokens == nil {
		h.tokens = ts
	}
	if a, ok := store.(AuditReader); ok && h.audit == nil {
		h.audit = a
	}
	m := http.NewServeMux()
	for _, rt := range h.routes() {
		if h.readOnly && !strings.HasPrefix(rt.pattern, "GET ") && !readOnlyWrites[rt.pattern] {
			rt.handle = h.refuseReadOnly
		}
		m.HandleFunc(rt.pattern, rt.handle)
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest, Code: "unknown_route",
			Message: fmt.Sprintf("no admin route %s %s", r.Method, r.URL.Path)})
	})
	h.mux = m
	return h
}

// route is one route of the admin API: a ServeMux pattern and its handler.
type route struct {
	pattern string
	handle  http.HandlerFunc
}

// routes are every route of the admin API; openapi.json documents each
// (TestOpenAPIRoutes).
func (h *handler) routes() []route {
	return []route{
		// POST session is answered by ServeHTTP before authentication (it
		// takes the token in its body); it is here for the table's sake
		// (the OpenAPI document, the scopes) and never reached through it.
		{"POST " + sessionPath, h.createSession},
		{"GET " + sessionPath, h.getSession},
		{"DELETE " + sessionPath, h.deleteSession},
		{"GET /v1/admin/tokens", h.listTokens},
		{"POST /v1/admin/tokens", h.createToken},
		{"POST /v1/admin/tokens/{id}/revoke", h.revokeToken},
		{"GET /v1/admin/audit", h.listAudit},
		{"GET /v1/admin/plans", h.listPlans},
		{"POST /v1/admin/plans", h.createPlan},
		{"GET /v1/admin/plans/{id}", h.getPlan},
		{"PUT /v1/admin/plans/{id}", h.updatePlan},
		{"DELETE /v1/admin/plans/{id}", h.deletePlan},
		{"GET /v1/admin/tenants", h.listTenants},
		{"POST /v1/admin/tenants", h.createTenant},
		{"GET /v1/admin/tenants/{id}", h.getTenant},
		{"PATCH /v1/admin/tenants/{id}", h.patchTenant},
		{"DELETE /v1/admin/tenants/{id}", h.deleteTenant},
		{"PUT /v1/admin/tenants/{id}/status", h.setTenantStatus},
		{"PUT /v1/admin/tenants/{id}/plugins", h.setTenantPlugins},
		{"POST /v1/admin/tenants/{id}/keys", h.createKey},
		{"GET /v1/admin/tenants/{id}/keys", h.listKeys},
		{"GET /v1/admin/tenants/{id}/usage", h.usage},
		{"GET /v1/admin/tenants/{id}/budgets", h.budgets},
		{"GET /v1/admin/keys", h.listAllKeys},
		{"GET /v1/admin/keys/{id}", h.getKey},
		{"PATCH /v1/admin/keys/{id}", h.patchKey},
		{"DELETE /v1/admin/keys/{id}", h.deleteKey},
		{"POST /v1/admin/keys/{id}/revoke", h.revokeKey},
		{"GET /v1/admin/prices", h.listPrices},
		{"PUT /v1/admin/prices", h.setPrice},
		{"GET /v1/admin/prices/{model...}", h.getPrice},
		{"DELETE /v1/admin/prices/{model...}", h.deletePrice},
		{"GET /v1/admin/usage", h.usageOver},
		{"GET /v1/admin/overview", h.overview},
		{"GET /v1/admin/guard-actions", h.guardActions},
		{"GET /v1/admin/requests", h.listRequests},
		{"POST /v1/admin/requests/{id}/cancel", h.cancelRequest},
		{"GET /v1/admin/policy", h.getPolicy},
		{"GET /v1/admin/openapi.json", h.openAPI},
	}
}

type noEvict struct{}

func (noEvict) EvictKey(tenant.KeyHash) {}
func (noEvict) EvictTenant(string)      {}
func (noEvict) EvictPlan(string)        {}
func (noEvict) EvictPrice(string)       {}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.noAuth {
		h.fail(w, r, &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServer,
			Code: "admin_disabled", Message: "admin API has no token configured"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	// Opening a session takes the token in its body (auth.go, session.go).
	if r.Method == http.MethodPost && r.URL.Path == sessionPath {
		h.createSession(w, r)
		return
	}
	p := h.authenticate(w, r)
	if p == nil {
		return
	}
	ctx := pg.WithActor(context.WithValue(r.Context(), principalKey{}, p), p.actor)
	h.mux.ServeHTTP(w, r.WithContext(ctx))
}

// Wire types. Limits of 0 mean "not set".

type planJSON struct {
	ID               string   `json:"id"`
	MonthlyBudgetUSD usd      `json:"monthly_budget_usd"`
	RPM              int64    `json:"rpm"`
	TPM              int64    `json:"tpm"`
	MaxTokens        int64    `json:"max_tokens"`
	AllowedModels    []string `json:"allowed_models"`
	// Budgets per scope and window; a tenant/month one replaces
	// monthly_budget_usd (set one of them).
	Budgets []budgetJSON `json:"budgets,omitempty"`
	// Plugins switch the policy's plugins on or off for the plan's
	// tenants and override their config (a JSON merge patch), by name.
	Plugins tenant.PluginOverrides `json:"plugins,omitempty"`
}

// planUpdate is the body of PUT /v1/admin/plans/{id}: a plan without its id,
// which is the path's. Every field is replaced.
type planUpdate struct {
	MonthlyBudgetUSD usd          `json:"monthly_budget_usd"`
	RPM              int64        `json:"rpm"`
	TPM              int64        `json:"tpm"`
	MaxTokens        int64        `json:"max_tokens"`
	AllowedModels    []string     `json:"allowed_models"`
	Budgets          []budgetJSON `json:"budgets,omitempty"`
	// Plugins replace the plan's plugin overrides (absent: none).
	Plugins tenant.PluginOverrides `json:"plugins,omitempty"`
}

type tenantJSON struct {
	ID     string `json:"id"`
	PlanID string `json:"plan_id"`
	Status string `json:"status,omitempty"`
	// Plugins are the tenant's own plugin overrides, over its plan's.
	Plugins tenant.PluginOverrides `json:"plugins,omitempty"`
}

type statusJSON struct {
	Status string `json:"status"`
}

type keyRequest struct {
	ExpiresAt *time.Time `json:"expires_at"`
	RPM       int64      `json:"rpm"`
	TPM       int64      `json:"tpm"`
	MaxTokens int64      `json:"max_tokens"`
	// The key's own budget per budget_window (month by default),
	// replacing the plan's key budgets; 0: the plan's.
	BudgetUSD    usd    `json:"budget_usd"`
	BudgetWindow string `json:"budget_window"`
}

// keyJSON is a key's record as shown: never its hash. Key is set only in
// the answer to its creation.
type keyJSON struct {
	ID        string     `json:"id"`
	Key       string     `json:"key,omitempty"`
	TenantID  string     `json:"tenant_id"`
	Prefix    string     `json:"prefix"`
	Status    string     `json:"status"`
	ExpiresAt *time.Time `json:"expires_at"` // null: never
	RPM       int64      `json:"rpm"`
	TPM       int64      `json:"tpm"`
	MaxTokens int64      `json:"max_tokens"`
	// BudgetUSD 0: the plan's key budgets apply.
	BudgetUSD    usd    `json:"budget_usd,omitempty"`
	BudgetWindow string `json:"budget_window,omitempty"`
}

// revokeRequest is the optional body of POST /v1/admin/keys/{id}/revoke.
type revokeRequest struct {
	// TenantID, if set, must own the key; it lets the handler find the
	// key's hash and evict it locally at once.
	TenantID string `json:"tenant_id"`
}

type usageJSON struct {
	TenantID    string `json:"tenant_id"`
	Month       string `json:"month"` // "2026-05", UTC
	SpendUSD    usd    `json:"spend_usd"`
	SpendMicros int64  `json:"spend_micros"` // the ledger's (spend_month)
	// The plan's monthly budget; 0 means none (and remaining is absent).
	BudgetUSD    usd   `json:"budget_usd"`
	BudgetMicros int64 `json:"budget_micros"`
	// From the budget counter, when the gateway has one: what it counts as
	// spent (settled requests whose rows may still be on their way to the
	// ledger) and what in-flight requests hold.
	CounterSpendMicros *int64 `json:"counter_spend_micros,omitempty"`
	ReservedUSD        *usd   `json:"reserved_usd,omitempty"`
	ReservedMicros     *int64 `json:"reserved_micros,omitempty"`
	// Budget − the larger spend − reserved.
	RemainingUSD    *usd   `json:"remaining_usd,omitempty"`
	RemainingMicros *int64 `json:"remaining_micros,omitempty"`
}

func (h *handler) createPlan(w http.ResponseWriter, r *http.Request) {
	var in planJSON
	if !h.decode(w, r, &in, false) {
		return
	}
	p := tenant.Plan{ID: in.ID, MonthlyBudgetMicros: int64(in.MonthlyBudgetUSD),
		Limits: tenant.Limits{RPM: in.RPM, TPM: in.TPM, MaxTokens: in.MaxTokens}, AllowedModels: in.AllowedModels,
		Budgets: budgetRules(in.Budgets), Plugins: in.Plugins}
	if !h.pluginsOK(w, r, p.Plugins, nil) {
		return
	}
	if err := h.store.CreatePlan(r.Context(), p); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.evict.EvictPlan(p.ID) // a plan deleted and re-created under the same id
	in.Budgets = budgetsOut(p.Budgets)
	h.reply(w, http.StatusCreated, in)
}

func (h *handler) updatePlan(w http.ResponseWriter, r *http.Request) {
	var in planUpdate
	if !h.decode(w, r, &in, false) {
		return
	}
	p := tenant.Plan{ID: r.PathValue("id"), MonthlyBudgetMicros: int64(in.MonthlyBudgetUSD),
		Limits: tenant.Limits{RPM: in.RPM, TPM: in.TPM, MaxTokens: in.MaxTokens}, AllowedModels: in.AllowedModels,
		Budgets: budgetRules(in.Budgets), Plugins: in.Plugins}
	if !h.pluginsOK(w, r, p.Plugins, nil) {
		return
	}
	if err := h.store.UpdatePlan(r.Context(), p); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.evict.EvictPlan(p.ID)
	h.reply(w, http.StatusOK, planJSON{ID: p.ID, MonthlyBudgetUSD: in.MonthlyBudgetUSD,
		RPM: in.RPM, TPM: in.TPM, MaxTokens: in.MaxTokens, AllowedModels: in.AllowedModels, Budgets: budgetsOut(p.Budgets), Plugins: in.Plugins})
}

func (h *handler) createTenant(w http.ResponseWriter, r *http.Request) {
	var in tenantJSON
	if !h.decode(w, r, &in, false) {
		return
	}
	if in.Status == "" {
		in.Status = tenant.StatusActive
	}
	if len(in.Plugins) > 0 {
		plan, err := h.store.PlanPlugins(r.Context(), in.PlanID)
		if err != nil {
			h.storeError(w, r, err)
			return
		}
		if !h.pluginsOK(w, r, plan, in.Plugins) {
			return
		}
	}
	if err := h.store.CreateTenant(r.Context(), tenant.Tenant{ID: in.ID, PlanID: in.PlanID, Status: in.Status, Plugins: in.Plugins}); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.evict.EvictTenant(in.ID)
	h.reply(w, http.StatusCreated, in)
}

func (h *handler) setTenantStatus(w http.ResponseWriter, r *http.Request) {
	var in statusJSON
	if !h.decode(w, r, &in, false) {
		return
	}
	id := r.PathValue("id")
	if err := h.store.SetTenantStatus(r.Context(), id, in.Status); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.evict.EvictTenant(id)
	h.reply(w, http.StatusOK, map[string]string{"id": id, "status": in.Status})
}

func (h *handler) createKey(w http.ResponseWriter, r *http.Request) {
	var in keyRequest
	if !h.decode(w, r, &in, true) {
		return
	}
	opts := pg.KeyOptions{Limits: tenant.Limits{RPM: in.RPM, TPM: in.TPM, MaxTokens: in.MaxTokens},
		Budget: keyBudget(in.BudgetUSD, in.BudgetWindow)}
	if in.ExpiresAt != nil {
		opts.ExpiresAt = in.ExpiresAt.UTC()
	}
	plaintext, k, err := h.store.CreateKey(r.Context(), r.PathValue("id"), opts)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	// A new hash cannot be cached, except as a negative entry if someone
	// presented the key before it existed; evict that.
	h.evict.EvictKey(k.Hash)
	out := keyOut(*k)
	out.Key = plaintext
	h.log.Info("created key", "tenant", k.TenantID, "key_id", k.ID, "prefix", k.Prefix)
	h.reply(w, http.StatusCreated, out)
}

func (h *handler) listKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := h.store.ListKeys(r.Context(), r.PathValue("id"))
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	out := make([]keyJSON, len(keys))
	for i, k := range keys {
		out[i] = keyOut(k)
	}
	h.reply(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

// revokeKey revokes a key by id. The store finds keys by id but hands out
// hashes only with a tenant's key list, so the local cache is evicted by
// hash only when the body names the key's tenant ({"tenant_id": "acme"});
// without it the local cache, like the other replicas', evicts on the
// store's NOTIFY (the api_keys trigger sends key:<hash>), a few milliseconds
// later.
func (h *handler) revokeKey(w http.ResponseWriter, r *http.Request) {
	var in revokeRequest
	if !h.decode(w, r, &in, true) {
		return
	}
	id := r.PathValue("id")
	// With tenant_id, the key must belong to that tenant.
	if in.TenantID != "" {
		keys, err := h.store.ListKeys(r.Context(), in.TenantID)
		if err != nil {
			h.storeError(w, r, err)
			return
		}
		if !slices.ContainsFunc(keys, func(k tenant.Key) bool { return k.ID == id }) {
			h.fail(w, r, &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest, Code: "not_found",
				Param: "tenant_id", Message: fmt.Sprintf("tenant %q has no key %q", in.TenantID, id)})
			return
		}
	}
	revoked, err := h.store.RevokeKeyHash(r.Context(), id)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	h.evict.EvictKey(revoked)
	h.log.Info("revoked key", "key_id", id)
	h.reply(w, http.StatusOK, map[string]string{"id": id, "status": tenant.StatusRevoked})
}

// usage answers the tenant's spend in the current UTC month. The key list
// tells an unknown tenant (404) from one without spend (0).
func (h *handler) usage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := h.store.ListKeys(r.Context(), id); err != nil {
		h.storeError(w, r, err)
		return
	}
	now := h.now().UTC()
	micros, err := h.store.MonthUsage(r.Context(), id, now)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	limit, err := h.store.TenantBudget(r.Context(), id)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	out := usageJSON{TenantID: id, Month: now.Format("2006-01"), SpendUSD: usd(micros), SpendMicros: micros,
		BudgetUSD: usd(limit), BudgetMicros: limit}
	spent, reserved := micros, int64(0)
	if h.budget != nil {
		scope := budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: out.Month}
		cs, res, err := h.budget.Status(r.Context(), id, scope)
		if err != nil {
			h.log.Warn("usage: budget counter unavailable", "tenant", id, "err", err)
		} else {
			out.CounterSpendMicros, out.ReservedMicros = &cs, &res
			ru := usd(res)
			out.ReservedUSD = &ru
			spent, reserved = max(spent, cs), res
		}
	}
	if limit > 0 {
		left := limit - spent - reserved
		lu := usd(left)
		out.RemainingMicros, out.RemainingUSD = &left, &lu
	}
	h.reply(w, http.StatusOK, out)
}

func (h *handler) cancelRequest(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if h.cancel == nil {
		h.fail(w, r, &openai.Error{Status: http.StatusNotImplemented, Type: openai.TypeInvalidRequest, Code: "not_available",
			Message: "cancelling requests is not available on this gateway"})
		return
	}
	found, err := h.cancel(r.Context(), id)
	switch {
	case err != nil:
		h.log.Warn("cancel: store unavailable", "request_id", id, "err", err)
		h.fail(w, r, &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "cancel_unavailable",
			Message: "the request could not be cancelled right now; retry shortly"})
	case !found:
		h.fail(w, r, &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest, Code: "request_not_found",
			Message: fmt.Sprintf("no request %q is in flight", id)})
	default:
		h.reply(w, http.StatusOK, map[string]string{"id": id, "object": "request.cancellation", "status": "cancelled"})
	}
}

func keyOut(k tenant.Key) keyJSON {
	out := keyJSON{ID: k.ID, TenantID: k.TenantID, Prefix: k.Prefix, Status: k.Status,
		RPM: k.Limits.RPM, TPM: k.Limits.TPM, MaxTokens: k.Limits.MaxTokens,
		BudgetUSD: usd(k.Budget.LimitMicros), BudgetWindow: k.Budget.Window}
	if !k.ExpiresAt.IsZero() {
		t := k.ExpiresAt.UTC()
		out.ExpiresAt = &t
	}
	return out
}

// decode reads the JSON body into v strictly: unknown fields, trailing data
// and bodies past maxBody are 400s. An empty body is {} if allowEmpty.
// It answers the error itself and reports whether to go on.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(new(json.RawMessage)) != io.EOF {
		err = errors.New("trailing data after the JSON object")
	}
	if err == nil || (allowEmpty && errors.Is(err, io.EOF)) {
		return true
	}
	e := &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_body"}
	var maxErr *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		e.Message = "empty request body: want a JSON object"
	case errors.As(err, &maxErr):
		e.Status, e.Message = http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", maxBody)
	case errors.As(err, &typeErr):
		e.Param, e.Message = typeErr.Field, fmt.Sprintf("field %q: want a JSON %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value)
	default:
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
			e.Param = strings.Trim(f, `"`)
		}
		e.Message = "invalid request body: " + msg
	}
	h.fail(w, r, e)
	return false
}

// storeError answers a store error: not found 404, exists 409, invalid 400,
// anything else 500 with the details only in the log.
func (h *handler) storeError(w http.ResponseWriter, r *http.Request, err error) {
	e := &openai.Error{Type: openai.TypeInvalidRequest, Message: err.Error()}
	switch {
	case errors.Is(err, tenant.ErrNotFound):
		e.Status, e.Code = http.StatusNotFound, "not_found"
	case errors.Is(err, pg.ErrExists):
		e.Status, e.Code = http.StatusConflict, "already_exists"
	case errors.Is(err, pg.ErrInvalid):
		e.Status, e.Code = http.StatusBadRequest, "invalid_value"
	case errors.Is(err, pg.ErrInUse):
		e.Status, e.Code = http.StatusConflict, "in_use"
	case errors.Is(err, ErrReadOnly):
		e.Status, e.Code = http.StatusNotImplemented, "read_only_store"
	case errors.Is(err, ErrNoCallLog):
		e.Status, e.Code = http.StatusNotImplemented, "no_call_log"
	default:
		h.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		e.Status, e.Type, e.Message = http.StatusInternalServerError, openai.TypeServer, "internal error; see the gateway's log"
	}
	h.fail(w, r, e)
}

func (h *handler) fail(w http.ResponseWriter, _ *http.Request, e *openai.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	w.Write(append(e.AppendJSON(nil), '\n'))
}

func (h *handler) reply(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only our own types: a bug
		h.log.Error("encoding an admin answer", "err", err)
		h.fail(w, nil, &openai.Error{Status: http.StatusInternalServerError, Type: openai.TypeServer, Message: "internal error"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
