package accounting

import (
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Charges takes the tenant, the bytes sent, the guard action and a settled
// cost from the plugins' request, and leaves the gateway's counts without
// plugins.
func TestCharges(t *testing.T) {
	tests := []struct {
		name      string
		plugins   bool
		tenant    *wasmhost.Tenant
		settled   int64 // -1: not settled
		cancelled bool
		want      calllog.Row
	}{
		{name: "no plugins", cancelled: true, want: calllog.Row{ReplyBytes: 40, PromptTokens: 5}},
		{name: "tenant and settled cost", plugins: true, tenant: &wasmhost.Tenant{ID: "t1", KeyID: "k1"}, settled: 17,
			want: calllog.Row{ReplyBytes: 9, PromptTokens: 5, TenantID: "t1", KeyID: "k1", CostMicros: 17}},
		{name: "cancelled", plugins: true, tenant: &wasmhost.Tenant{ID: "t1", KeyID: "k1"}, settled: -1, cancelled: true,
			want: calllog.Row{ReplyBytes: 9, PromptTokens: 5, TenantID: "t1", KeyID: "k1", GuardAction: "cancelled"}},
		{name: "unsettled without a ledger is not priced", plugins: true, tenant: &wasmhost.Tenant{ID: "t2"}, settled: -1,
			want: calllog.Row{ReplyBytes: 9, PromptTokens: 5, TenantID: "t2"}},
		{name: "no tenant", plugins: true, settled: -1, want: calllog.Row{ReplyBytes: 9, PromptTokens: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Accounting{}
			row := calllog.Row{ReplyBytes: 40, PromptTokens: 5}
			var r *wasmhost.Request
			if tt.plugins {
				r = wasmhost.AcquireRequest()
				defer wasmhost.ReleaseRequest(r)
				r.Tenant, r.TextBytesSent = tt.tenant, 9
				if tt.settled >= 0 {
					r.CostMicros, r.CostSettled = tt.settled, true
				}
			}
			a.Charges(&row, r, nil, tt.cancelled)
			if row != tt.want {
				t.Errorf("row %+v, want %+v", row, tt.want)
			}
			if err := a.WriteRow(&row); err != nil {
				t.Errorf("without a ledger: %v", err)
			}
		})
	}
}
