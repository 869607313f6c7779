package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

const keysUsage = `usage:
  tollgate keys create -tenant ID [-expires 2026-12-31T00:00:00Z] [-rpm N] [-tpm N] [-max-tokens N]
  tollgate keys revoke -id KEYID [-tenant ID]
  tollgate keys list -tenant ID

Every command takes -admin URL (default $TOLLGATE_ADMIN_URL, else http://127.0.0.1:9091)
and reads the admin token from $TOLLGATE_ADMIN_TOKEN (never a flag: it would show in ps).
`

// keysDefaultAdmin is the admin API's address when neither -admin nor
// $TOLLGATE_ADMIN_URL is given.
const keysDefaultAdmin = "http://127.0.0.1:9091"

// keysTimeout bounds one admin API call.
const keysTimeout = 30 * time.Second

// keys runs "tollgate keys create|revoke|list" against the admin API.
func keys(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, keysUsage)
		return 2
	}
	if a := args[0]; a == "-h" || a == "-help" || a == "--help" || a == "help" {
		fmt.Fprint(stdout, keysUsage)
		return 0
	}
	fs := flag.NewFlagSet("tollgate keys "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, keysUsage) }
	admin := adminURLFlag(fs)
	tenantID := fs.String("tenant", "", "tenant id")
	var run func(c *keysClient) error
	switch args[0] {
	case "create":
		expires := fs.String("expires", "", "expiry time, RFC 3339 (default: never)")
		rpm := fs.Int64("rpm", 0, "requests per minute (0: the plan's)")
		tpm := fs.Int64("tpm", 0, "tokens per minute (0: the plan's)")
		maxTokens := fs.Int64("max-tokens", 0, "cap on max_tokens (0: the plan's)")
		run = func(c *keysClient) error {
			return keysCreate(c, stdout, stderr, *tenantID, *expires, *rpm, *tpm, *maxTokens)
		}
	case "revoke":
		id := fs.String("id", "", "key id (key_...)")
		run = func(c *keysClient) error { return keysRevoke(c, stdout, *id, *tenantID) }
	case "list":
		run = func(c *keysClient) error { return keysList(c, stdout, *tenantID) }
	default:
		fmt.Fprintf(stderr, "tollgate keys: unknown command %q\n\n%s", args[0], keysUsage)
		return 2
	}
	return parseAndRunAdmin("tollgate keys "+args[0], fs, args[1:], admin, stderr, run)
}

// parseAndRunAdmin parses a subcommand's flags (args, after its name) and,
// with no stray arguments, runs run against the admin API at *admin
// (read after parsing: it is a flag). cmd names the subcommand in
// messages.
func parseAndRunAdmin(cmd string, fs *flag.FlagSet, args []string, admin *string, stderr io.Writer, run func(c *keysClient) error) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", cmd, fs.Args())
		return 2
	}
	return runAdminClient(cmd, *admin, stderr, run)
}

// adminURLFlag defines -admin on fs: the admin API's base URL, by default
// $TOLLGATE_ADMIN_URL, else keysDefaultAdmin.
func adminURLFlag(fs *flag.FlagSet) *string {
	admin := os.Getenv("TOLLGATE_ADMIN_URL")
	if admin == "" {
		admin = keysDefaultAdmin
	}
	return fs.String("admin", admin, "admin API base URL")
}

// runAdminClient runs run with a client of the admin API at admin, whose
// token comes from $TOLLGATE_ADMIN_TOKEN (never a flag: it would show in
// ps), and returns the exit code: 2 for a usage error, 1 for another.
func runAdminClient(cmd, admin string, stderr io.Writer, run func(c *keysClient) error) int {
	token := os.Getenv("TOLLGATE_ADMIN_TOKEN")
	if token == "" {
		fmt.Fprintf(stderr, "%s: $TOLLGATE_ADMIN_TOKEN is not set\n", cmd)
		return 2
	}
	c := &keysClient{base: strings.TrimRight(admin, "/"), token: token, http: &http.Client{Timeout: keysTimeout}}
	if err := run(c); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		var u keysUsageError
		if errors.As(err, &u) {
			return 2
		}
		return 1
	}
	return 0
}

// keysUsageError is a missing or malformed flag.
type keysUsageError string

func (e keysUsageError) Error() string { return string(e) }

// keyRecord is a key as the admin API shows it.
type keyRecord struct {
	ID        string     `json:"id"`
	Key       string     `json:"key"`
	TenantID  string     `json:"tenant_id"`
	Prefix    string     `json:"prefix"`
	Status    string     `json:"status"`
	ExpiresAt *time.Time `json:"expires_at"`
}

func keysCreate(c *keysClient, stdout, stderr io.Writer, tenantID, expires string, rpm, tpm, maxTokens int64) error {
	if tenantID == "" {
		return keysUsageError("-tenant is required")
	}
	body := map[string]any{"rpm": rpm, "tpm": tpm, "max_tokens": maxTokens}
	if expires != "" {
		t, err := time.Parse(time.RFC3339, expires)
		if err != nil {
			return keysUsageError(fmt.Sprintf("-expires %q: want RFC 3339, e.g. 2026-12-31T00:00:00Z", expires))
		}
		body["expires_at"] = t
	}
	var k keyRecord
	if err := c.call(http.MethodPost, "/v1/admin/tenants/"+url.PathEscape(tenantID)+"/keys", body, &k); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "Store this key now: it is not stored anywhere and will not be shown again.\n")
	fmt.Fprintf(stdout, "%s\n", k.Key)
	fmt.Fprintf(stderr, "id %s, prefix %s, tenant %s, expires %s\n", k.ID, k.Prefix, k.TenantID, keysExpiry(k.ExpiresAt))
	return nil
}

func keysRevoke(c *keysClient, stdout io.Writer, id, tenantID string) error {
	if id == "" {
		return keysUsageError("-id is required")
	}
	var body any
	if tenantID != "" {
		body = map[string]string{"tenant_id": tenantID}
	}
	if err := c.call(http.MethodPost, "/v1/admin/keys/"+url.PathEscape(id)+"/revoke", body, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked %s\n", id)
	return nil
}

func keysList(c *keysClient, stdout io.Writer, tenantID string) error {
	if tenantID == "" {
		return keysUsageError("-tenant is required")
	}
	var list struct {
		Data []keyRecord `json:"data"`
	}
	if err := c.call(http.MethodGet, "/v1/admin/tenants/"+url.PathEscape(tenantID)+"/keys", nil, &list); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tSTATUS\tEXPIRES")
	for _, k := range list.Data {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Status, keysExpiry(k.ExpiresAt))
	}
	return tw.Flush()
}

func keysExpiry(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

// keysClient calls the admin API.
type keysClient struct {
	base  string
	token string
	http  *http.Client
}

// call sends body (nil: none) as JSON and decodes a 2xx answer into out
// (nil: ignored). Other answers become an error with the API's message.
func (c *keysClient) call(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("admin URL %q: %w", c.base, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is said once, below
		}
		return fmt.Errorf("cannot reach the admin API at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the admin API's answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("admin API: %s (HTTP %d)", e.Error.Message, resp.StatusCode)
		}
		return fmt.Errorf("admin API at %s answered %s", c.base, resp.Status)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decoding the admin API's answer: %w", err)
		}
	}
	return nil
}
