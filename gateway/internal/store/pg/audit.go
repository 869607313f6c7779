package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// An audit entry is written by every admin write, inside the write's own
// transaction (migration 00012): the write and its entry commit together or
// not at all.

type actorKey struct{}

// ActorUnknown is the actor recorded for a write whose context names none
// (a write made outside the admin API, as by a test or a migration tool).
const ActorUnknown = "unknown"

// WithActor returns ctx carrying who makes the writes done with it: the
// admin token's id, or "bootstrap" for the environment's token.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// Actor returns the actor ctx carries, or ActorUnknown.
func Actor(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return ActorUnknown
}

// Audit is one admin_audit row. Before and After are JSON images of the
// resource (nil: none, as before a creation or after a deletion).
type Audit struct {
	Action     string // "plan.create", "tenant.update", "key.revoke", …
	Resource   string // "plan", "tenant", "key", "price", "admin_token"
	ResourceID string
	Before     json.RawMessage
	After      json.RawMessage
}

// Row images of the audited tables, locking the row for the write. Hashes
// of keys and admin tokens are left out (adminTokenImage is in tokens.go).
const (
	planImage   = `SELECT to_jsonb(p) FROM plans p WHERE id = $1 FOR UPDATE`
	tenantImage = `SELECT to_jsonb(t) FROM tenants t WHERE id = $1 FOR UPDATE`
	keyImage    = `SELECT to_jsonb(k) - 'key_hash' FROM api_keys k WHERE id = $1 FOR UPDATE`
	priceImage  = `SELECT to_jsonb(m) FROM model_prices m WHERE model = $1 AND effective_from = $2 FOR UPDATE`
)

// insertAudit writes a in tx, with the actor from ctx.
func insertAudit(ctx context.Context, tx pgx.Tx, a Audit) error {
	if a.Action == "" || a.Resource == "" {
		return errors.New("audit entry without action or resource")
	}
	_, err := tx.Exec(ctx, `
INSERT INTO admin_audit (actor, action, resource, resource_id, before, after)
VALUES ($1, $2, $3, $4, $5, $6)`, Actor(ctx), a.Action, a.Resource, a.ResourceID, nullJSON(a.Before), nullJSON(a.After))
	if err != nil {
		return fmt.Errorf("writing the audit entry: %w", err)
	}
	return nil
}

// rowImage runs query, a SELECT of one jsonb column (for example
// `SELECT to_jsonb(p) FROM plans p WHERE id = $1 FOR UPDATE`, or with
// `to_jsonb(k) - 'hash'` to leave a secret out), and returns its value, or
// nil when no row matches.
func rowImage(ctx context.Context, tx pgx.Tx, query string, args ...any) (json.RawMessage, error) {
	var img []byte
	err := tx.QueryRow(ctx, query, args...).Scan(&img)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return img, nil
}

// audited runs write in tx between two images of the row query selects
// (see rowImage; args are its arguments) and records both in admin_audit.
// The first image locks the row if the query says FOR UPDATE, so the
// before image is the row the write changed.
func audited(ctx context.Context, tx pgx.Tx, action, resource, id, query string, args []any, write func() error) error {
	before, err := rowImage(ctx, tx, query, args...)
	if err != nil {
		return err
	}
	if err := write(); err != nil {
		return err
	}
	after, err := rowImage(ctx, tx, query, args...)
	if err != nil {
		return err
	}
	return insertAudit(ctx, tx, Audit{Action: action, Resource: resource, ResourceID: id, Before: before, After: after})
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}
