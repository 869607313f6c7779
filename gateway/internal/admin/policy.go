package admin

import (
	"net/http"
	"time"
)

// PolicyInfo is the running policy as GET /v1/admin/policy shows it.
type PolicyInfo struct {
	// Generation counts the policies this process ran: 1 for the one it
	// started with, +1 per successful reload.
	Generation int64     `json:"generation"`
	LoadedAt   time.Time `json:"loaded_at"`
	Reloads    int64     `json:"reloads"`
	// LastReloadError is the error of the last failed reload, if the
	// last reload failed (the previous policy kept serving); null else.
	LastReloadError   *string      `json:"last_reload_error"`
	LastReloadErrorAt *time.Time   `json:"last_reload_error_at"`
	Store             string       `json:"store"` // "postgres" or "memory"
	Plugins           []PluginInfo `json:"plugins"`
}

// PluginInfo is one of the policy's plugins with its counters since it was
// loaded.
type PluginInfo struct {
	Name   string   `json:"name"`
	Phases []string `json:"phases"`
	// Instances alive in its pool.
	Instances int64 `json:"instances"`
	// OnError is "closed" (a failure fails the request) or "open".
	OnError string `json:"on_error"`
	Calls   int64  `json:"calls"`
	// Errors are traps and timeouts.
	Errors    int64 `json:"errors"`
	Traps     int64 `json:"traps"`
	Timeouts  int64 `json:"timeouts"`
	PoolWaits int64 `json:"pool_waits"`
	Overdue   int64 `json:"overdue"`
	// Events are the plugin's own counters (metric_add), by name.
	Events map[string]int64 `json:"events"`
}

// WithPolicy serves GET /v1/admin/policy from info.
func WithPolicy(info func() PolicyInfo) Option { return func(h *handler) { h.policy = info } }

func (h *handler) getPolicy(w http.ResponseWriter, r *http.Request) {
	if !h.noQuery(w, r) {
		return
	}
	if h.policy == nil {
		h.reply(w, http.StatusOK, PolicyInfo{Store: h.storeKind(), Plugins: []PluginInfo{}})
		return
	}
	p := h.policy()
	if p.Plugins == nil {
		p.Plugins = []PluginInfo{}
	}
	h.reply(w, http.StatusOK, p)
}

func (h *handler) storeKind() string {
	if h.readOnly {
		return "memory"
	}
	return "postgres"
}
