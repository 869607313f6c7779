package tenant

import (
	"reflect"
	"strings"
	"testing"
)

func TestPlanBudgets(t *testing.T) {
	day := BudgetRule{Scope: BudgetKey, Window: WindowDay, LimitMicros: 5_000_000}
	tests := []struct {
		name    string
		monthly int64
		rules   []BudgetRule
		want    []BudgetRule
		wantErr string
	}{
		{"none", 0, nil, nil, ""},
		{"monthly only", 7, nil, []BudgetRule{{Scope: BudgetTenant, Window: WindowMonth, LimitMicros: 7}}, ""},
		{"monthly and rules", 7, []BudgetRule{day}, []BudgetRule{{Scope: BudgetTenant, Window: WindowMonth, LimitMicros: 7}, day}, ""},
		{"tenant month rule", 0, []BudgetRule{{Scope: BudgetTenant, Window: WindowMonth, LimitMicros: 9, Alerts: []int{80, 100}}},
			[]BudgetRule{{Scope: BudgetTenant, Window: WindowMonth, LimitMicros: 9, Alerts: []int{80, 100}}}, ""},
		{"monthly twice", 7, []BudgetRule{{Scope: BudgetTenant, Window: WindowMonth, LimitMicros: 9}}, nil, "set twice"},
		{"same scope window", 0, []BudgetRule{day, day}, nil, "budgets[1]: a second key budget per day"},
		{"bad scope", 0, []BudgetRule{{Scope: "team", Window: WindowDay, LimitMicros: 1}}, nil, "budgets[0]: scope must be"},
		{"bad window", 0, []BudgetRule{{Scope: BudgetUser, Window: "week", LimitMicros: 1}}, nil, "window must be"},
		{"zero limit", 0, []BudgetRule{{Scope: BudgetUser, Window: WindowDay}}, nil, "limit must be positive"},
		{"alert range", 0, []BudgetRule{{Scope: BudgetUser, Window: WindowDay, LimitMicros: 1, Alerts: []int{0}}}, nil, "alerts[0]"},
		{"alert order", 0, []BudgetRule{{Scope: BudgetUser, Window: WindowDay, LimitMicros: 1, Alerts: []int{90, 80}}}, nil, "ascending"},
		{"negative monthly", -1, nil, nil, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PlanBudgets(tt.monthly, tt.rules)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("PlanBudgets = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestAppendBudgets(t *testing.T) {
	plan := Plan{MonthlyBudgetMicros: 100, Budgets: []BudgetRule{
		{Scope: BudgetTenant, Window: WindowMonth, LimitMicros: 100},
		{Scope: BudgetKey, Window: WindowDay, LimitMicros: 5, Alerts: []int{50}},
		{Scope: BudgetUser, Window: WindowDay, LimitMicros: 1},
	}}
	tests := []struct {
		name string
		snap Snapshot
		want []BudgetRule
	}{
		{"plan's", Snapshot{Plan: plan}, plan.Budgets},
		{"key's own, same window keeps alerts", Snapshot{Plan: plan, Key: Key{Budget: KeyBudget{LimitMicros: 2, Window: WindowDay}}},
			[]BudgetRule{plan.Budgets[0], plan.Budgets[2], {Scope: BudgetKey, Window: WindowDay, LimitMicros: 2, Alerts: []int{50}}}},
		{"key's own, other window", Snapshot{Plan: plan, Key: Key{Budget: KeyBudget{LimitMicros: 30, Window: WindowMonth}}},
			[]BudgetRule{plan.Budgets[0], plan.Budgets[2], {Scope: BudgetKey, Window: WindowMonth, LimitMicros: 30}}},
		{"monthly field only", Snapshot{Plan: Plan{MonthlyBudgetMicros: 8}},
			[]BudgetRule{{Scope: BudgetTenant, Window: WindowMonth, LimitMicros: 8}}},
		{"none", Snapshot{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.snap.AppendBudgets(nil)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("AppendBudgets = %+v, want %+v", got, tt.want)
			}
		})
	}
	s := Snapshot{Plan: plan, Key: Key{Budget: KeyBudget{LimitMicros: 2, Window: WindowDay}}}
	dst := make([]BudgetRule, 0, 8)
	if n := testing.AllocsPerRun(100, func() { dst = s.AppendBudgets(dst[:0]) }); n != 0 {
		t.Errorf("AppendBudgets allocates %v times with room in dst", n)
	}
}
