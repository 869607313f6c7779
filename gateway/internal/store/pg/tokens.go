package pg

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// Admin token format: AdminTokenPrefix, then the base62 digits of 32 random
// bytes, padded to KeyDigits (migration 00013).
const AdminTokenPrefix = "tgadm_"

// Admin token scopes: what a token may do through the admin API.
const (
	ScopeRead   = "read"   // every GET
	ScopeWrite  = "write"  // every other write
	ScopeCancel = "cancel" // cancelling requests in flight
)

// Scopes are every scope, in their canonical order.
var Scopes = []string{ScopeRead, ScopeWrite, ScopeCancel}

// AdminToken is a stored admin token's record. The token itself is stored
// nowhere: only its SHA-256 and its display prefix are.
type AdminToken struct {
	ID        string // "tok_" and 16 characters
	Name      string
	Prefix    string // the token's first characters, for display
	Scopes    []string
	CreatedAt time.Time
	CreatedBy string    // the actor that created it
	ExpiresAt time.Time // zero: never
	RevokedAt time.Time // zero: not revoked
}

// Usable reports whether the token authenticates at now: neither revoked
// nor expired.
func (t *AdminToken) Usable(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

// AdminTokenOptions are a new admin token's settings.
type AdminTokenOptions struct {
	Name   string   // required, 1 to 200 bytes
	Scopes []string // a non-empty subset of Scopes
	// ExpiresAt is when the token stops working; zero means never. It
	// must be in the future.
	ExpiresAt time.Time
}

// HashAdminToken is the SHA-256 of token: what admin_tokens stores and
// looks tokens up by.
func HashAdminToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// CanonicalScopes checks scopes and returns them deduplicated in the order
// of Scopes; an empty list or an unknown scope is an error wrapping
// ErrInvalid.
func CanonicalScopes(scopes []string) ([]string, error) {
	if len(scopes) == 0 {
		return nil, fmt.Errorf("no scopes: want some of %s: %w", strings.Join(Scopes, ", "), ErrInvalid)
	}
	for _, sc := range scopes {
		if !slices.Contains(Scopes, sc) {
			return nil, fmt.Errorf("unknown scope %q: want some of %s: %w", sc, strings.Join(Scopes, ", "), ErrInvalid)
		}
	}
	var out []string
	for _, sc := range Scopes {
		if slices.Contains(scopes, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

// adminTokenImage is an admin token's row for the audit log, without its
// hash.
const adminTokenImage = `SELECT to_jsonb(t) - 'hash' FROM admin_tokens t WHERE id = $1 FOR UPDATE`

const adminTokenColumns = `id, name, prefix, scopes, created_at, created_by, expires_at, revoked_at`

// CreateAdminToken creates an admin token, created by the actor of ctx,
// and returns the token itself, which is stored nowhere (only its SHA-256
// and display prefix are), so this is the one chance to hand it out; and
// its record. Bad options are an error wrapping ErrInvalid.
func (s *Store) CreateAdminToken(ctx context.Context, opts AdminTokenOptions) (string, *AdminToken, error) {
	scopes, err := CanonicalScopes(opts.Scopes)
	if err != nil {
		return "", nil, fmt.Errorf("creating an admin token: %w", err)
	}
	if opts.Name == "" || len(opts.Name) > maxIDLen {
		return "", nil, fmt.Errorf("creating an admin token: name %q: want 1 to %d bytes: %w", opts.Name, maxIDLen, ErrInvalid)
	}
	if !opts.ExpiresAt.IsZero() && !opts.ExpiresAt.After(time.Now()) {
		return "", nil, fmt.Errorf("creating an admin token: expires_at %s is not in the future: %w",
			opts.ExpiresAt.UTC().Format(time.RFC3339), ErrInvalid)
	}
	plaintext, err := newSecret(AdminTokenPrefix)
	if err != nil {
		return "", nil, err
	}
	id, err := newID("tok_")
	if err != nil {
		return "", nil, err
	}
	hash := HashAdminToken(plaintext)
	var tok *AdminToken
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "admin_token.create", "admin_token", id, adminTokenImage, []any{id}, func() error {
			row := tx.QueryRow(ctx, `
INSERT INTO admin_tokens (id, name, hash, prefix, scopes, created_by, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING `+adminTokenColumns,
				id, opts.Name, hash[:], plaintext[:len(AdminTokenPrefix)+displayDigits], scopes, Actor(ctx), nullTime(opts.ExpiresAt))
			tok, err = scanAdminToken(row)
			return err
		})
	})
	if err != nil {
		return "", nil, fmt.Errorf("creating admin token %q: %w", opts.Name, classify(err))
	}
	return plaintext, tok, nil
}

// AdminTokenByHash returns the admin token with SHA-256 h, revoked and
// expired ones included (AdminToken.Usable decides), or an error wrapping
// tenant.ErrNotFound. One statement, never cached: a revocation takes
// effect on the next call.
func (s *Store) AdminTokenByHash(ctx context.Context, h [sha256.Size]byte) (*AdminToken, error) {
	tok, err := scanAdminToken(s.pool.QueryRow(ctx, `SELECT `+adminTokenColumns+` FROM admin_tokens WHERE hash = $1`, h[:]))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("admin token %x…: %w", h[:4], tenant.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading admin token %x…: %w", h[:4], err)
	}
	return tok, nil
}

// ListAdminTokens returns every admin token's record, revoked and expired
// ones included, oldest first.
func (s *Store) ListAdminTokens(ctx context.Context) ([]AdminToken, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+adminTokenColumns+` FROM admin_tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("listing admin tokens: %w", err)
	}
	defer rows.Close()
	out := []AdminToken{}
	for rows.Next() {
		tok, err := scanAdminToken(rows)
		if err != nil {
			return nil, fmt.Errorf("listing admin tokens: %w", err)
		}
		out = append(out, *tok)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing admin tokens: %w", err)
	}
	return out, nil
}

// RevokeAdminToken revokes admin token id and returns its record.
// Revoking a revoked token succeeds and keeps its revocation time; an
// unknown id is an error wrapping tenant.ErrNotFound.
func (s *Store) RevokeAdminToken(ctx context.Context, id string) (*AdminToken, error) {
	var tok *AdminToken
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "admin_token.revoke", "admin_token", id, adminTokenImage, []any{id}, func() error {
			var err error
			tok, err = scanAdminToken(tx.QueryRow(ctx, `
UPDATE admin_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1
RETURNING `+adminTokenColumns, id))
			if errors.Is(err, pgx.ErrNoRows) {
				err = tenant.ErrNotFound
			}
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("revoking admin token %q: %w", id, classify(err))
	}
	return tok, nil
}

func scanAdminToken(row pgx.Row) (*AdminToken, error) {
	var (
		t                AdminToken
		expires, revoked *time.Time
	)
	if err := row.Scan(&t.ID, &t.Name, &t.Prefix, &t.Scopes, &t.CreatedAt, &t.CreatedBy, &expires, &revoked); err != nil {
		return nil, err
	}
	t.CreatedAt = t.CreatedAt.UTC()
	if expires != nil {
		t.ExpiresAt = expires.UTC()
	}
	if revoked != nil {
		t.RevokedAt = revoked.UTC()
	}
	return &t, nil
}

// newSecret returns prefix and the base62 digits of 32 random bytes,
// padded to KeyDigits.
func newSecret(prefix string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating a secret: %w", err)
	}
	digits := new(big.Int).SetBytes(b[:]).Text(62)
	return prefix + strings.Repeat("0", KeyDigits-len(digits)) + digits, nil
}

// idEncoding spells key and token ids: lowercase base32, no padding.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID returns prefix and 16 random lowercase base32 characters. Ids are
// not secret.
func newID(prefix string) (string, error) {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating an id: %w", err)
	}
	return prefix + idEncoding.EncodeToString(b[:]), nil
}

// AuditFilter selects admin_audit rows; empty fields select every row.
type AuditFilter struct {
	Resource   string
	ResourceID string
	Actor      string
	// BeforeID, if not 0, keeps rows with a smaller id (a page's cursor).
	BeforeID int64
	// Limit caps the rows returned (1 to 10000).
	Limit int
}

// AuditEntry is one admin_audit row.
type AuditEntry struct {
	ID int64
	At time.Time
	Audit
	Actor string
}

// ListAudit returns the audit rows f selects, newest (highest id) first.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	if f.Limit < 1 || f.Limit > 10000 {
		return nil, fmt.Errorf("listing the audit log: limit %d: want 1 to 10000: %w", f.Limit, ErrInvalid)
	}
	rows, err := s.pool.Query(ctx, `
SELECT id, at, actor, action, resource, resource_id, before, after FROM admin_audit
WHERE ($1 = '' OR resource = $1) AND ($2 = '' OR resource_id = $2) AND ($3 = '' OR actor = $3)
  AND ($4 = 0 OR id < $4)
ORDER BY id DESC
LIMIT $5`, f.Resource, f.ResourceID, f.Actor, f.BeforeID, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("listing the audit log: %w", err)
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var (
			e             AuditEntry
			before, after []byte
		)
		if err := rows.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.Resource, &e.ResourceID, &before, &after); err != nil {
			return nil, fmt.Errorf("listing the audit log: %w", err)
		}
		e.At = e.At.UTC()
		if before != nil {
			e.Before = json.RawMessage(before)
		}
		if after != nil {
			e.After = json.RawMessage(after)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the audit log: %w", err)
	}
	return out, nil
}
