package accounting

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
)

// seeder seeds the budget counter from the ledger: a tenant's month from
// its spend_month counter (calllog.MonthSpend, one row), every other
// scope (a tenant's day, a key's or an end user's day or month) by
// summing its call_log rows of the period through the indexes of
// migration 00009 (calllog.ScopeSpend). Rows still on their way to the
// ledger (queued, spooled) are not in either; the reconcile job corrects
// what they leave out.
// seedTimeout bounds one seed read. The budget's callers hold no
// deadline of their own (a plugin's host call runs under
// context.Background()), and a Postgres connection that a network
// partition hung never fails: without a bound, a request whose budget
// counter Redis lacks — after a Redis restart, in a new period, for a new
// tenant — would wait forever, and every request sharing its seed (one
// per counter in a process) with it. The tenant cache's load has the same
// bound (tenant.DefaultCacheLoadTimeout).
var seedTimeout = 5 * time.Second

// A read that finds its connection ended by the server (a Postgres
// restart) runs once more on a new one (pg.ReadAgain), logged at warn on
// log.
func seeder(pool *pgxpool.Pool, log *slog.Logger) budget.Seeder {
	return func(ctx context.Context, tenant string, s budget.Scope) (int64, error) {
		ctx, cancel := context.WithTimeout(ctx, seedTimeout)
		defer cancel()
		from, to, err := periodBounds(s)
		if err != nil {
			return 0, err
		}
		var spent int64
		lost, err := pg.ReadAgain(ctx, pool, func() (err error) {
			if s.Kind == budget.ScopeTenant && s.Window == budget.Month {
				spent, err = calllog.MonthSpend(ctx, pool, tenant, from)
			} else {
				spent, err = calllog.ScopeSpend(ctx, pool, tenant, s.Kind, s.ID, from, to)
			}
			return err
		})
		if lost != nil {
			log.Warn("Postgres ended a connection of the call log's pool; the pool is reset and the seed read again on a new connection", "err", lost)
		}
		return spent, err
	}
}

// periodBounds returns the UTC instants a scope's period starts and ends.
func periodBounds(s budget.Scope) (from, to time.Time, err error) {
	if s.Window == budget.Day {
		from, err = time.Parse("2006-01-02", s.Period)
		return from, from.AddDate(0, 0, 1), wrapPeriod(s, err)
	}
	from, err = time.Parse("2006-01", s.Period)
	return from, from.AddDate(0, 1, 0), wrapPeriod(s, err)
}

func wrapPeriod(s budget.Scope, err error) error {
	if err != nil {
		return fmt.Errorf("budget scope %s: period %q: %w", s, s.Period, err)
	}
	return nil
}

// scopeFromSum is the budget scope a ledger sum is about.
func scopeFromSum(sum calllog.ScopeSum) budget.Scope {
	s := budget.Scope{Kind: sum.Kind, ID: sum.ID}
	if sum.Window == "day" {
		s.Window = budget.Day
	}
	s.Period = s.Window.Period(sum.From)
	return s
}

// reconcileScopes brings the counters of the key, end-user and tenant/day
// budgets of the current periods in line with the ledger
// (calllog.ActiveScopes), and returns how many it checked and the absolute
// micros it corrected. As for the tenant's month, a correction sets spent
// to what the ledger holds, so settles whose rows had not reached the
// ledger yet are left out until the next run. A scope whose counter is
// missing is seeded with the same sum by Status, and so never drifts.
func reconcileScopes(ctx context.Context, pool *pgxpool.Pool, counter budget.Counter, now time.Time, log *slog.Logger) (checked int, drift int64, err error) {
	sums, err := calllog.ActiveScopes(ctx, pool, now)
	for _, sum := range sums {
		s := scopeFromSum(sum)
		spent, _, serr := counter.Status(ctx, sum.Tenant, s)
		if serr != nil {
			log.Warn("reconcile: reading a budget counter", "tenant", sum.Tenant, "scope", s.Kind, "period", s.Period, "err", serr)
			continue
		}
		checked++
		if spent == sum.Spent {
			continue
		}
		if cerr := counter.Correct(ctx, sum.Tenant, s, sum.Spent); cerr != nil {
			log.Warn("reconcile: correcting a budget counter", "tenant", sum.Tenant, "scope", s.Kind, "period", s.Period, "err", cerr)
			continue
		}
		drift += abs(sum.Spent - spent)
		log.Warn("budget counter drifted from the call log; corrected", "tenant", sum.Tenant, "scope", s.Kind,
			"window", s.Window.String(), "period", s.Period, "counter", spent, "actual", sum.Spent, "drift", sum.Spent-spent)
	}
	return checked, drift, err
}
