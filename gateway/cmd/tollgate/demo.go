package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/policies"
)

// The embedded default policy's demo keys, by the key_env names
// policies/default.yaml gives them.
const (
	demoKeyEnv        = "TOLLGATE_DEMO_KEY"         // plan demo: room for the stream and guard lines
	demoLimitedKeyEnv = "TOLLGATE_DEMO_LIMITED_KEY" // rpm 3: the fourth request a minute gets 429
	demoSpentKeyEnv   = "TOLLGATE_DEMO_SPENT_KEY"   // a $0.000001 budget: insufficient_quota
)

// demoKeys are the API keys of the embedded default policy, by key_env
// name. They are made at start from crypto/rand, so no published key ever
// opens a gateway, and live only in this process: the policy's store gets
// their hashes, and the start banner prints them.
type demoKeys map[string]string

// newDemoKeys makes the three demo keys.
func newDemoKeys() (demoKeys, error) {
	d := demoKeys{}
	for _, env := range []string{demoKeyEnv, demoLimitedKeyEnv, demoSpentKeyEnv} {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("making a demo key: %w", err)
		}
		d[env] = "tg_demo_" + hex.EncodeToString(b[:])
	}
	return d, nil
}

// lookupEnv answers the demo keys' names with the keys, anything else from
// the process's environment.
func (d demoKeys) lookupEnv(name string) (string, bool) {
	if v, ok := d[name]; ok {
		return v, true
	}
	return os.LookupEnv(name)
}

// loadEmbedded parses the embedded default policy with the demo keys and
// hands the store their hashes in place of their key_env names (the store
// reads the process's environment, where the keys are not).
func loadEmbedded(d demoKeys) (*config.Policy, error) {
	p, err := config.Parse(policies.Default, d.lookupEnv)
	if err != nil {
		return nil, err
	}
	for i := range p.Tenants.Tenants {
		keys := p.Tenants.Tenants[i].Keys
		for j := range keys {
			if key, ok := d[keys[j].KeyEnv]; ok {
				sum := sha256.Sum256([]byte(key))
				keys[j].KeySHA256, keys[j].KeyEnv = hex.EncodeToString(sum[:]), ""
			}
		}
	}
	return p, nil
}

// printDemo writes the banner of the embedded default policy: the demo
// keys and a curl line showing each built-in plugin at work, against the
// gateway listening on addr.
func printDemo(w io.Writer, addr net.Addr, d demoKeys) {
	host := addr.String()
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		host = net.JoinHostPort("127.0.0.1", fmt.Sprint(ta.Port))
	}
	url := "http://" + host + "/v1/chat/completions"
	const (
		stream = `'{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"Hello"}]}'`
		plain  = `'{"model":"mock-1","messages":[{"role":"user","content":"Hello"}]}'`
		// X-Mock-Text is the mock's reply (URL query encoding): a link
		// into image storage that no tool produced.
		marker = `'X-Mock-Text: Here+is+your+image:+https://oaidalleapiprodscus.blob.core.windows.net/private/cat.png+enjoy!'`
	)
	fmt.Fprintf(w, `
Tollgate serves the embedded default policy on http://%[1]s: the mock model
behind the four built-in plugins (preflight, ratelimit, budget, holdback).
Demo keys, made at start and valid until it stops:

  %[2]s=%[3]s
  %[4]s=%[5]s   (3 requests a minute)
  %[6]s=%[7]s   (a $0.000001 monthly budget)

A streamed reply:
  curl -sN %[8]s -H 'Authorization: Bearer %[3]s' -H 'Content-Type: application/json' -d %[9]s

The guard (holdback) stops a reply that links to image storage:
  curl -sN %[8]s -H 'Authorization: Bearer %[3]s' -H 'Content-Type: application/json' -H %[10]s -d %[9]s

The rate limit: the fourth request within a minute gets 429 and Retry-After:
  for i in 1 2 3 4; do curl -s -o /dev/null -D - %[8]s -H 'Authorization: Bearer %[5]s' -H 'Content-Type: application/json' -d %[11]s | grep -iE '^(HTTP|retry-after)'; done

The budget: a request whose cost the budget cannot cover gets insufficient_quota:
  curl -s %[8]s -H 'Authorization: Bearer %[7]s' -H 'Content-Type: application/json' -d %[11]s

`, host, demoKeyEnv, d[demoKeyEnv], demoLimitedKeyEnv, d[demoLimitedKeyEnv], demoSpentKeyEnv, d[demoSpentKeyEnv],
		url, stream, marker, plain)
}
