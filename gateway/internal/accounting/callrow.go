package accounting

import (
	"context"

	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/gateway/internal/hostsvc"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Charges fills in row what a finished request's plugins and host
// services settled (r nil: the policy has no plugins, and row keeps what
// the gateway counted): the tenant and key the tenant service resolved,
// the text bytes the client got (after guards), the guard action (a
// plugin's guard_action fact, else cancelled when the request was), and
// the cost. row's tokens must be filled already: a cost no budget plugin
// settled is priced from them by services.
func (a *Accounting) Charges(row *calllog.Row, r *wasmhost.Request, services *hostsvc.Set, cancelled bool) {
	if r == nil {
		return
	}
	row.ReplyBytes = r.TextBytesSent
	if t := r.Tenant; t != nil {
		row.TenantID, row.KeyID = t.ID, t.KeyID
	}
	if v, ok := r.Fact("guard_action"); ok {
		row.GuardAction = string(v)
	}
	if cancelled && row.GuardAction == "" {
		row.GuardAction = "cancelled"
	}
	switch {
	case r.CostSettled:
		row.CostMicros = r.CostMicros
	case row.TenantID != "" && a.Ledger != nil:
		// No budget plugin settled it: the ledger still prices what
		// was used, so spend is known either way. (Without a ledger
		// nothing prices it: a price miss would be a store read per
		// request.)
		row.CostMicros, _ = services.UsageCost(r, hostsvc.TokenUsage(row.PromptTokens, row.CompletionTokens, r.TokenKindsUsed))
	}
}

// WriteRow hands row to the call log. Rows belong to a tenant: one no
// plugin resolved a tenant for (a missing or wrong key) is only in the
// access log, and without a ledger there is no call log; neither is an
// error.
func (a *Accounting) WriteRow(row *calllog.Row) error {
	if a.Ledger == nil || row.TenantID == "" {
		return nil
	}
	return a.Ledger.Write(context.Background(), *row)
}

// LogsAhead reports whether rows go through the call log's write-ahead log
// (LogRow before the reply's end; docs/adr/0022-call-log-wal.md).
func (a *Accounting) LogsAhead() bool { return a.Ledger != nil && a.logCfg.WAL.Mode != "off" }

// LogRow makes row durable in the call log's write-ahead log before the
// reply's last byte, and sets row.WAL, which the row later handed to
// WriteRow must carry. Rows without a tenant, or without a ledger, are
// not logged (nil).
func (a *Accounting) LogRow(row *calllog.Row) error {
	if a.Ledger == nil || row.TenantID == "" {
		return nil
	}
	return a.Ledger.Log(row)
}

// Ready returns calllog.ErrWALFull or calllog.ErrStuck (wrapped) while the
// call log cannot take rows durably: the request is refused before it
// costs anything.
func (a *Accounting) Ready() error {
	if a.Ledger == nil {
		return nil
	}
	return a.Ledger.Ready()
}
