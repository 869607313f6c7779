package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

const adminTokensUsage = `usage:
  tollgate admin-tokens create -name NAME -scopes read,write[,cancel] [-expires 720h]
  tollgate admin-tokens list
  tollgate admin-tokens revoke -id TOKENID

Admin tokens are the admin API's credentials besides $TOLLGATE_ADMIN_TOKEN: scoped
(read: every GET; write: every other write; cancel: cancelling requests in flight),
optionally expiring, revocable. create prints the token alone on stdout, once; a token
can grant only the scopes it holds. -expires is a duration from now (720h) or an
RFC 3339 time. Every command takes -admin URL (default $TOLLGATE_ADMIN_URL, else
http://127.0.0.1:9091) and reads the admin token from $TOLLGATE_ADMIN_TOKEN.
`

// adminTokens runs "tollgate admin-tokens create|list|revoke" against the
// admin API, with the client of "tollgate keys".
func adminTokens(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, adminTokensUsage)
		return 2
	}
	if a := args[0]; a == "-h" || a == "-help" || a == "--help" || a == "help" {
		fmt.Fprint(stdout, adminTokensUsage)
		return 0
	}
	fs := flag.NewFlagSet("tollgate admin-tokens "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, adminTokensUsage) }
	admin := adminURLFlag(fs)
	var run func(c *keysClient) error
	switch args[0] {
	case "create":
		name := fs.String("name", "", "the token's name (who or what uses it)")
		scopes := fs.String("scopes", "", "comma-separated scopes: read, write, cancel")
		expires := fs.String("expires", "", "lifetime from now (720h) or an RFC 3339 time (default: never)")
		run = func(c *keysClient) error {
			return adminTokensCreate(c, stdout, stderr, *name, *scopes, *expires, time.Now())
		}
	case "list":
		run = func(c *keysClient) error { return adminTokensList(c, stdout) }
	case "revoke":
		id := fs.String("id", "", "token id (tok_...)")
		run = func(c *keysClient) error { return adminTokensRevoke(c, stdout, *id) }
	default:
		fmt.Fprintf(stderr, "tollgate admin-tokens: unknown command %q\n\n%s", args[0], adminTokensUsage)
		return 2
	}
	return parseAndRunAdmin("tollgate admin-tokens "+args[0], fs, args[1:], admin, stderr, run)
}

// adminTokenRecord is an admin token as the admin API shows it.
type adminTokenRecord struct {
	ID        string     `json:"id"`
	Token     string     `json:"token"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by"`
	ExpiresAt *time.Time `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// adminTokensExpiry reads -expires: a positive duration from now or an
// RFC 3339 time; "" is never (nil).
func adminTokensExpiry(s string, now time.Time) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return nil, keysUsageError(fmt.Sprintf("-expires %q: want a positive duration", s))
		}
		t := now.Add(d).UTC()
		return &t, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, keysUsageError(fmt.Sprintf("-expires %q: want a duration (720h) or an RFC 3339 time", s))
	}
	return &t, nil
}

func adminTokensCreate(c *keysClient, stdout, stderr io.Writer, name, scopes, expires string, now time.Time) error {
	if name == "" {
		return keysUsageError("-name is required")
	}
	if scopes == "" {
		return keysUsageError("-scopes is required (read, write, cancel; comma-separated)")
	}
	exp, err := adminTokensExpiry(expires, now)
	if err != nil {
		return err
	}
	body := map[string]any{"name": name, "scopes": strings.Split(scopes, ",")}
	if exp != nil {
		body["expires_at"] = exp
	}
	var tok adminTokenRecord
	if err := c.call(http.MethodPost, "/v1/admin/tokens", body, &tok); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "Store this token now: it is not stored anywhere and will not be shown again.\n")
	fmt.Fprintf(stdout, "%s\n", tok.Token)
	fmt.Fprintf(stderr, "id %s, name %s, prefix %s, scopes %s, expires %s\n", tok.ID, tok.Name, tok.Prefix,
		strings.Join(tok.Scopes, ","), keysExpiry(tok.ExpiresAt))
	return nil
}

func adminTokensList(c *keysClient, stdout io.Writer) error {
	var all []adminTokenRecord
	cursor := ""
	for {
		path := "/v1/admin/tokens?limit=500"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		var page struct {
			Data       []adminTokenRecord `json:"data"`
			HasMore    bool               `json:"has_more"`
			NextCursor string             `json:"next_cursor"`
		}
		if err := c.call(http.MethodGet, path, nil, &page); err != nil {
			return err
		}
		all = append(all, page.Data...)
		if !page.HasMore || page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tSCOPES\tCREATED_BY\tEXPIRES\tREVOKED")
	for _, t := range all {
		revoked := "-"
		if t.RevokedAt != nil {
			revoked = t.RevokedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Prefix, strings.Join(t.Scopes, ","), t.CreatedBy,
			keysExpiry(t.ExpiresAt), revoked)
	}
	return tw.Flush()
}

func adminTokensRevoke(c *keysClient, stdout io.Writer, id string) error {
	if id == "" {
		return keysUsageError("-id is required")
	}
	if err := c.call(http.MethodPost, "/v1/admin/tokens/"+url.PathEscape(id)+"/revoke", nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked %s\n", id)
	return nil
}
