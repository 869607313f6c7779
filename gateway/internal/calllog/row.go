package calllog

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
)

// Row is one proxied request, as the call_log table stores it. It carries
// identifiers, counts and timings only, never prompt or completion text.
type Row struct {
	// RequestID is unique per request and is the idempotency key: with
	// StartedAt it is call_log's primary key, so writing the same row twice
	// stores it (and adds its cost) once.
	RequestID string
	TenantID  string
	KeyID     string // "" is stored as NULL
	Model     string
	Upstream  string // "" is stored as NULL
	Status    int
	// StartedAt decides the call_log partition and the spend_month month:
	// its UTC calendar month.
	StartedAt time.Time
	FirstByte time.Duration // < 0: unknown, stored as NULL; else whole milliseconds
	Total     time.Duration // < 0: unknown, stored as NULL; else whole milliseconds
	// Token counts; < 0: unknown, stored as NULL.
	PromptTokens     int64
	CompletionTokens int64
	// Kinds are the parts of the token counts by kind the upstream
	// reported (NULL columns when it reported none).
	Kinds TokenKinds
	// CostMicros is the request's cost in USD micros, added to the tenant's
	// spend_month counter. It must not be negative.
	CostMicros  int64
	GuardAction string // "" is stored as NULL
	// ReplyBytes is the reply text the client received, in bytes (after
	// guards); < 0: unknown → NULL.
	ReplyBytes int64
	Attempts   int // 0 is stored as 1
	// EndUser is the end user the client named for the request (see
	// config.Server.EndUserHeader); "" is stored as NULL. Key and
	// end-user budgets are seeded from these rows.
	EndUser string
	// Cache is the response cache's part in the request: "" (no cache
	// took part; stored as NULL), CacheHit, CacheMiss or CacheBypass. Any
	// other value is an invalid row.
	Cache string
	// SavedMicros is, for a hit, what the stored reply would have cost at
	// the price in force when it was served, in USD micros: the spend the
	// hit avoided. It is 0 for every row that is not a hit, and never
	// negative (an invalid row otherwise).
	SavedMicros int64
	// WAL is the row's record in the write-ahead log, set by Writer.Log
	// (zero: none). Write releases it once the row is stored.
	WAL Mark
}

// TokenKinds are a row's tokens of the kinds priced apart: parts of its
// prompt tokens (the first four) and completion tokens (the last three).
type TokenKinds struct {
	// Reported says the upstream reported usage: the kinds are stored
	// (0 included); else the columns are NULL.
	Reported                                        bool
	CachedInput, CacheWrite, AudioInput, ImageInput int64
	Reasoning, AudioOutput, ImageOutput             int64
}

// counts are k's counts in call_log's column order.
func (k *TokenKinds) counts() [7]int64 {
	return [7]int64{k.CachedInput, k.CacheWrite, k.AudioInput, k.ImageInput, k.Reasoning, k.AudioOutput, k.ImageOutput}
}

func kindsOf(c [7]int64) TokenKinds {
	return TokenKinds{Reported: true, CachedInput: c[0], CacheWrite: c[1], AudioInput: c[2], ImageInput: c[3],
		Reasoning: c[4], AudioOutput: c[5], ImageOutput: c[6]}
}

// The values of Row.Cache besides "" (no cache took part), as call_log
// stores them.
const (
	// CacheHit: the reply was served from the cache.
	CacheHit = "hit"
	// CacheMiss: the cache was consulted and the reply came from the
	// upstream.
	CacheMiss = "miss"
	// CacheBypass: the client or a policy said not to use the cache.
	CacheBypass = "bypass"
)

// ErrInvalidRow is returned by Write for a row that could never be stored;
// the error names the field.
var ErrInvalidRow = errors.New("invalid call-log row")

// maxFieldBytes caps each text field. Ids are at most 200 characters in the
// schema (tenants, keys); the cap keeps a runaway value from making a batch
// huge, and keeps every failure of a valid row a Postgres-reported one.
const maxFieldBytes = 1000

// validate reports the first field of r that Postgres would reject for
// every batch holding it, or that is a bug in the caller. Errors that
// depend on the database's contents (an unknown tenant) are found by
// Postgres and isolated by the writer.
func (r *Row) validate() error {
	fields := []struct {
		name, value string
		required    bool
	}{
		{"RequestID", r.RequestID, true},
		{"TenantID", r.TenantID, true},
		{"KeyID", r.KeyID, false},
		{"Model", r.Model, true},
		{"Upstream", r.Upstream, false},
		{"GuardAction", r.GuardAction, false},
		{"EndUser", r.EndUser, false},
	}
	for _, f := range fields {
		switch {
		case f.required && f.value == "":
			return fmt.Errorf("%w: empty %s", ErrInvalidRow, f.name)
		case len(f.value) > maxFieldBytes:
			return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalidRow, f.name, len(f.value), maxFieldBytes)
		case !utf8.ValidString(f.value) || strings.IndexByte(f.value, 0) >= 0:
			// Postgres text holds neither.
			return fmt.Errorf("%w: %s is not UTF-8 text without NUL bytes", ErrInvalidRow, f.name)
		}
	}
	if y := r.StartedAt.UTC().Year(); y < 2000 || y > 9999 {
		// A zero or garbage time would create a partition for its month.
		return fmt.Errorf("%w: StartedAt %s is not a plausible time", ErrInvalidRow, r.StartedAt.Format(time.RFC3339))
	}
	if r.CostMicros < 0 {
		return fmt.Errorf("%w: negative CostMicros %d", ErrInvalidRow, r.CostMicros)
	}
	if r.Attempts < 0 {
		return fmt.Errorf("%w: negative Attempts %d", ErrInvalidRow, r.Attempts)
	}
	switch r.Cache {
	case "", CacheHit, CacheMiss, CacheBypass:
	default:
		return fmt.Errorf("%w: Cache %q is none of \"\", %q, %q, %q", ErrInvalidRow, r.Cache, CacheHit, CacheMiss, CacheBypass)
	}
	switch {
	case r.SavedMicros < 0:
		return fmt.Errorf("%w: negative SavedMicros %d", ErrInvalidRow, r.SavedMicros)
	case r.SavedMicros > 0 && r.Cache != CacheHit:
		return fmt.Errorf("%w: SavedMicros %d with Cache %q: only a hit saves", ErrInvalidRow, r.SavedMicros, r.Cache)
	}
	return nil
}

// MonthStart returns midnight UTC of the first day of the UTC calendar month
// holding t: the month of spend_month and of a call_log partition.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// columns holds a batch as one array per call_log column, the parameters
// of insertSQL.
type columns struct {
	requestID, tenantID, keyID, model, upstream []pgtype.Text
	status, attempts                            []int32
	startedAt                                   []time.Time
	firstByteMS, totalMS                        []pgtype.Int8
	promptTokens, completionTokens, costMicros  []pgtype.Int8
	guardAction                                 []pgtype.Text
	replyBytes                                  []pgtype.Int8
	endUser                                     []pgtype.Text
	cache                                       []pgtype.Text
	savedMicros                                 []int64
	kinds                                       [7][]pgtype.Int8 // TokenKinds, in order
}

func newColumns(rows []Row) *columns {
	n := len(rows)
	c := &columns{
		requestID: make([]pgtype.Text, n), tenantID: make([]pgtype.Text, n),
		keyID: make([]pgtype.Text, n), model: make([]pgtype.Text, n),
		upstream: make([]pgtype.Text, n), status: make([]int32, n),
		attempts: make([]int32, n), startedAt: make([]time.Time, n),
		firstByteMS: make([]pgtype.Int8, n), totalMS: make([]pgtype.Int8, n),
		promptTokens: make([]pgtype.Int8, n), completionTokens: make([]pgtype.Int8, n),
		costMicros: make([]pgtype.Int8, n), guardAction: make([]pgtype.Text, n),
		replyBytes: make([]pgtype.Int8, n), endUser: make([]pgtype.Text, n),
		cache: make([]pgtype.Text, n), savedMicros: make([]int64, n),
	}
	for k := range c.kinds {
		c.kinds[k] = make([]pgtype.Int8, n)
	}
	for i := range rows {
		r := &rows[i]
		c.requestID[i] = pgtype.Text{String: r.RequestID, Valid: true}
		c.tenantID[i] = pgtype.Text{String: r.TenantID, Valid: true}
		c.keyID[i] = optText(r.KeyID)
		c.model[i] = pgtype.Text{String: r.Model, Valid: true}
		c.upstream[i] = optText(r.Upstream)
		c.status[i] = int32(r.Status)
		c.attempts[i] = int32(max(r.Attempts, 1))
		c.startedAt[i] = r.StartedAt
		c.firstByteMS[i] = optMillis(r.FirstByte)
		c.totalMS[i] = optMillis(r.Total)
		c.promptTokens[i] = optCount(r.PromptTokens)
		c.completionTokens[i] = optCount(r.CompletionTokens)
		c.costMicros[i] = pgtype.Int8{Int64: r.CostMicros, Valid: true}
		c.guardAction[i] = optText(r.GuardAction)
		c.replyBytes[i] = optCount(r.ReplyBytes)
		c.endUser[i] = optText(r.EndUser)
		c.cache[i] = optText(r.Cache)
		c.savedMicros[i] = r.SavedMicros
		for k, n := range r.Kinds.counts() {
			c.kinds[k][i] = pgtype.Int8{Int64: n, Valid: r.Kinds.Reported}
		}
	}
	return c
}

func (c *columns) args() []any {
	return []any{c.requestID, c.tenantID, c.keyID, c.model, c.upstream, c.status,
		c.startedAt, c.firstByteMS, c.totalMS, c.promptTokens, c.completionTokens,
		c.costMicros, c.guardAction, c.attempts, c.replyBytes, c.endUser,
		c.kinds[0], c.kinds[1], c.kinds[2], c.kinds[3], c.kinds[4], c.kinds[5], c.kinds[6],
		c.cache, c.savedMicros}
}

func optText(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

func optMillis(d time.Duration) pgtype.Int8 {
	return pgtype.Int8{Int64: d.Milliseconds(), Valid: d >= 0}
}

func optCount(n int64) pgtype.Int8 { return pgtype.Int8{Int64: n, Valid: n >= 0} }

// tenantMonth is one spend_month counter.
type tenantMonth struct {
	tenant string
	month  time.Time // MonthStart
}

// tenantMonths returns the distinct counters rows add to, in the order of
// their first row. (The statements lock them in SQL's own order; see
// ensureSpendSQL.)
func tenantMonths(rows []Row) []tenantMonth {
	seen := make(map[tenantMonth]struct{}, 4)
	var out []tenantMonth
	for i := range rows {
		k := tenantMonth{rows[i].TenantID, MonthStart(rows[i].StartedAt)}
		if _, ok := seen[k]; !ok {
			seen[k] = struct{}{}
			out = append(out, k)
		}
	}
	return out
}
