package budget_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
)

// The scopes of the multi-scope scenarios, with their seeded spend: the
// tenant's month, its key's day and its end user's day.
var (
	scopeT = budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: 10_000, Alerts: []int{50, 80, 100}}
	scopeK = budget.Scope{Kind: budget.ScopeKey, ID: "k:1", Window: budget.Day, Period: "2026-11-03", Limit: 1_000, Alerts: []int{90}}
	scopeU = budget.Scope{Kind: budget.ScopeUser, ID: "u{1}", Window: budget.Day, Period: "2026-11-03", Limit: 600}
	seeded = map[string]int64{"T": 4_000, "K": 200, "U": 0}
	named  = map[string]budget.Scope{"T": scopeT, "K": scopeK, "U": scopeU}
)

// in returns the scopes named by letters, in that order: in("TK").
func in(letters string) []budget.Scope {
	out := make([]budget.Scope, 0, len(letters))
	for _, l := range letters {
		out = append(out, named[string(l)])
	}
	return out
}

// mstep is one call of a multi-scope scenario. amount is the amount, the
// extension, the lowered hold or the actual cost, depending on op.
type mstep struct {
	op     string // reserve, extend, shrink, settle, status
	id     string
	scopes string // letters of the scopes (status: one)
	amount int64
	// reserve, extend: the result; refusedBy names the scope that refused.
	want      budget.Reservation
	refusedBy string
	// status: spent and reserved of the scope.
	spent, reserved int64
	// settle: the crossings reported, as "letter pct before→after".
	crossed []string
	err     error
}

func mreserve(id, scopes string, amount int64, want budget.Reservation, refusedBy string) mstep {
	return mstep{op: "reserve", id: id, scopes: scopes, amount: amount, want: want, refusedBy: refusedBy}
}

func mextend(id, scopes string, more int64, want budget.Reservation, refusedBy string) mstep {
	return mstep{op: "extend", id: id, scopes: scopes, amount: more, want: want, refusedBy: refusedBy}
}

func mshrink(id, scopes string, to int64) mstep {
	return mstep{op: "shrink", id: id, scopes: scopes, amount: to}
}

func msettle(id, scopes string, actual int64, crossed ...string) mstep {
	return mstep{op: "settle", id: id, scopes: scopes, amount: actual, crossed: crossed}
}

func mstatus(scope string, spent, reserved int64) mstep {
	return mstep{op: "status", scopes: scope, spent: spent, reserved: reserved}
}

func mfails(s mstep, err error) mstep { s.err = err; return s }

func dup(r budget.Reservation) budget.Reservation    { r.Duplicate = true; return r }
func remade(r budget.Reservation) budget.Reservation { r.Recreated = true; return r }

// Every scenario starts from the seeded spend: T 4000 of 10000, K 200 of
// 1000, U 0 of 600.
var scopeScenarios = []struct {
	name  string
	steps []mstep
}{
	{"admitted in every scope, remaining is the least", []mstep{
		mreserve("a", "TKU", 300, admitted(0, 300, 300), ""),
		mstatus("T", 4000, 300), mstatus("K", 200, 300), mstatus("U", 0, 300),
	}},
	{"the tightest scope refuses and nothing is held anywhere", []mstep{
		mreserve("a", "TKU", 601, refused(0, 0, 600), "U"),
		mstatus("T", 4000, 0), mstatus("K", 200, 0), mstatus("U", 0, 0),
		mreserve("a", "TKU", 600, admitted(0, 600, 0), ""),
	}},
	{"of several scopes that refuse, the one with least room is named", []mstep{
		mreserve("a", "TKU", 900, refused(0, 0, 600), "U"),
		mreserve("b", "TK", 500, admitted(200, 500, 300), ""),
		mreserve("c", "TKU", 700, refused(200, 500, 300), "K"),
		mreserve("d", "TU", 700, refused(0, 0, 600), "U"),
		mstatus("T", 4000, 500), mstatus("K", 200, 500), mstatus("U", 0, 0),
	}},
	{"holds of different scope lists add up per scope", []mstep{
		mreserve("a", "TK", 400, admitted(200, 400, 400), ""),
		mreserve("b", "TU", 400, admitted(0, 400, 200), ""),
		mreserve("c", "KU", 300, refused(0, 400, 200), "U"),
		mreserve("c", "KU", 200, admitted(0, 600, 0), ""),
		mstatus("T", 4000, 800), mstatus("K", 200, 600), mstatus("U", 0, 600),
	}},
	{"a limit passed in one scope refuses even nothing", []mstep{
		msettle("x", "K", 900, "K 90 200→1100"),
		mreserve("a", "TKU", 0, refused(1100, 0, -100), "K"),
		mreserve("b", "TU", 0, admitted(0, 0, 600), ""),
	}},
	{"extend refused by one scope leaves every hold", []mstep{
		mreserve("a", "TKU", 300, admitted(0, 300, 300), ""),
		mextend("a", "TKU", 301, refused(0, 300, 300), "U"),
		mstatus("T", 4000, 300), mstatus("K", 200, 300), mstatus("U", 0, 300),
		mextend("a", "TKU", 300, admitted(0, 600, 0), ""),
		mstatus("T", 4000, 600), mstatus("K", 200, 600),
	}},
	{"extend makes the hold in a scope without one", []mstep{
		mreserve("a", "T", 100, admitted(4000, 100, 5900), ""),
		mextend("a", "TK", 50, remade(admitted(200, 50, 750)), ""),
		mstatus("T", 4000, 150), mstatus("K", 200, 50),
		mextend("a", "TK", 50, admitted(200, 100, 700), ""),
	}},
	{"reserve with a grown list holds in the new scope only", []mstep{
		mreserve("a", "T", 300, admitted(4000, 300, 5700), ""),
		mreserve("a", "TK", 300, admitted(200, 300, 500), ""),
		mstatus("T", 4000, 300), mstatus("K", 200, 300),
		mreserve("a", "TK", 999, dup(admitted(200, 300, 500)), ""),
		// K holds already and need not fit 700, but still has the least
		// room: Remaining is K's, the refusal U's.
		mreserve("a", "TKU", 700, refused(200, 300, 500), "U"),
		mstatus("T", 4000, 300), mstatus("K", 200, 300), mstatus("U", 0, 0),
	}},
	{"shrink lowers the hold in every scope, never raises it", []mstep{
		mreserve("a", "TKU", 500, admitted(0, 500, 100), ""),
		mshrink("a", "TKU", 200),
		mstatus("T", 4000, 200), mstatus("K", 200, 200), mstatus("U", 0, 200),
		mshrink("a", "TKU", 300),
		mstatus("U", 0, 200),
		mshrink("a", "K", 50),
		mstatus("T", 4000, 200), mstatus("K", 200, 50),
		mreserve("b", "TKU", 400, admitted(0, 600, 0), ""),
	}},
	{"settle charges every scope and frees every hold", []mstep{
		mreserve("a", "TKU", 500, admitted(0, 500, 100), ""),
		msettle("a", "TKU", 450),
		mstatus("T", 4450, 0), mstatus("K", 650, 0), mstatus("U", 450, 0),
		msettle("a", "TKU", 450),
		mstatus("T", 4450, 0), mstatus("K", 650, 0), mstatus("U", 450, 0),
	}},
	{"settle reports each threshold it crosses, once", []mstep{
		msettle("a", "TKU", 600),
		msettle("b", "TK", 500, "T 50 4600→5100", "K 90 800→1300"),
		msettle("b", "TK", 500),
		msettle("c", "T", 2899),
		msettle("d", "T", 1, "T 80 7999→8000"),
		msettle("e", "T", 2001, "T 100 8000→10001"),
		msettle("f", "TK", 0),
		mstatus("T", 10001, 0), mstatus("K", 1300, 0),
	}},
	{"one settle may cross several thresholds", []mstep{
		msettle("a", "KT", 6000, "K 90 200→6200", "T 50 4000→10000", "T 80 4000→10000", "T 100 4000→10000"),
	}},
	{"a settled id is settled in every scope list", []mstep{
		msettle("a", "K", 10),
		mfails(mreserve("a", "T", 10, budget.Reservation{}, ""), budget.ErrSettled),
		mfails(mextend("a", "TU", 10, budget.Reservation{}, ""), budget.ErrSettled),
		msettle("a", "TU", 10),
		mstatus("T", 4000, 0), mstatus("K", 210, 0), mstatus("U", 0, 0),
	}},
}

func TestScopes(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			for _, sc := range scopeScenarios {
				t.Run(sc.name, func(t *testing.T) {
					tenant := "tenant " + sc.name
					l := newLedger(nil)
					for letter, spent := range seeded {
						l.set(ledgerKeyOf(tenant, named[letter]), spent)
					}
					c := be.new(t, l.seed)
					for i, s := range sc.steps {
						runScopeStep(t, c, tenant, i, s)
					}
					if n := l.calls.Load(); n > 3 {
						t.Errorf("Seeder called %d times, want at most 3 (once per scope)", n)
					}
				})
			}
		})
	}
}

// ledgerKeyOf is the key ledger.seed reads for a scope.
func ledgerKeyOf(tenant string, s budget.Scope) string {
	if s.Kind == budget.ScopeTenant && s.Window == budget.Month {
		return tenant
	}
	return ledgerKey(tenant, s)
}

func runScopeStep(t *testing.T, c budget.Counter, tenant string, i int, s mstep) {
	t.Helper()
	ctx := context.Background()
	where := fmt.Sprintf("step %d %s(%q, %s, %d)", i, s.op, s.id, s.scopes, s.amount)
	check := func(err error) bool {
		t.Helper()
		if s.err != nil {
			if !errors.Is(err, s.err) {
				t.Fatalf("%s: error %v, want %v", where, err, s.err)
			}
			return false
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		return true
	}
	switch s.op {
	case "reserve", "extend":
		f := c.Reserve
		if s.op == "extend" {
			f = c.Extend
		}
		got, err := f(ctx, tenant, s.id, in(s.scopes), s.amount, time.Minute)
		if !check(err) {
			return
		}
		refusedBy := ""
		if got.Refused != nil {
			refusedBy = letterOf(*got.Refused)
			got.Refused = nil
		}
		if got != s.want || refusedBy != s.refusedBy {
			t.Fatalf("%s = %+v refused by %q, want %+v refused by %q", where, got, refusedBy, s.want, s.refusedBy)
		}
	case "shrink":
		check(c.Shrink(ctx, tenant, s.id, in(s.scopes), s.amount))
	case "settle":
		crossings, err := c.Settle(ctx, tenant, s.id, in(s.scopes), s.amount)
		if !check(err) {
			return
		}
		var got []string
		for _, x := range crossings {
			if x.Tenant != tenant || x.At.IsZero() {
				t.Errorf("%s: crossing %+v of another tenant or without a time", where, x)
			}
			got = append(got, fmt.Sprintf("%s %d %d→%d", letterOf(x.Scope), x.Threshold, x.Before, x.After))
		}
		if !slices.Equal(got, s.crossed) {
			t.Fatalf("%s crossed %q, want %q", where, got, s.crossed)
		}
	case "status":
		spent, reserved, err := c.Status(ctx, tenant, named[s.scopes])
		if check(err) && (spent != s.spent || reserved != s.reserved) {
			t.Fatalf("%s = %d, %d, want %d, %d", where, spent, reserved, s.spent, s.reserved)
		}
	default:
		t.Fatalf("unknown op %q", s.op)
	}
}

// letterOf names one of the scenario scopes; a scope that is not one of
// them (a copy that lost a field) is named by its String.
func letterOf(s budget.Scope) string {
	for l, n := range named {
		if n.Kind == s.Kind && n.ID == s.ID && n.Period == s.Period && n.Limit == s.Limit &&
			n.Window == s.Window && slices.Equal(n.Alerts, s.Alerts) {
			return l
		}
	}
	return s.String()
}

// TestInvalidScopes: lists the counter cannot key or would count twice are
// refused before anything is sent, by every operation.
func TestInvalidScopes(t *testing.T) {
	ctx := context.Background()
	bad := []struct {
		name   string
		scopes []budget.Scope
	}{
		{"none", nil},
		{"unknown kind", []budget.Scope{{Kind: "settled", ID: "x", Period: month, Limit: 1}}},
		{"empty kind", []budget.Scope{{Period: month, Limit: 1}}},
		{"no period", []budget.Scope{{Kind: budget.ScopeTenant, Limit: 1}}},
		{"negative limit", []budget.Scope{{Kind: budget.ScopeTenant, Period: month, Limit: -1}}},
		{"unknown window", []budget.Scope{{Kind: budget.ScopeTenant, Window: 2, Period: month, Limit: 1}}},
		{"zero threshold", []budget.Scope{{Kind: budget.ScopeTenant, Period: month, Limit: 1, Alerts: []int{0}}}},
		{"listed twice", []budget.Scope{scopeT, scopeK, {Kind: budget.ScopeTenant, Period: month, Limit: 5}}},
	}
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			l := newLedger(nil)
			c := be.new(t, l.seed)
			for _, b := range bad {
				ops := map[string]error{}
				_, ops["reserve"] = c.Reserve(ctx, "acme", "r", b.scopes, 1, time.Minute)
				_, ops["extend"] = c.Extend(ctx, "acme", "r", b.scopes, 1, time.Minute)
				ops["shrink"] = c.Shrink(ctx, "acme", "r", b.scopes, 1)
				_, ops["settle"] = c.Settle(ctx, "acme", "r", b.scopes, 1)
				if len(b.scopes) == 1 {
					_, _, ops["status"] = c.Status(ctx, "acme", b.scopes[0])
					ops["correct"] = c.Correct(ctx, "acme", b.scopes[0], 1)
				}
				for op, err := range ops {
					if !errors.Is(err, budget.ErrInvalid) {
						t.Errorf("%s with %s: %v, want ErrInvalid", op, b.name, err)
					}
				}
			}
			if n := l.calls.Load(); n != 0 {
				t.Errorf("Seeder called %d times for invalid scopes", n)
			}
			// The request id was never settled by any of them.
			if res, err := c.Reserve(ctx, "acme", "r", in("T"), 1, time.Minute); err != nil || !res.Admitted {
				t.Fatalf("Reserve after the invalid calls = %+v, %v", res, err)
			}
		})
	}
}
