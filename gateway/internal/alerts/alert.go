package alerts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
)

// Reasons an alert fires.
const (
	// ReasonCrossed: a settle took the spend across the threshold.
	ReasonCrossed = "crossed"
	// ReasonRefused: a request was refused because the budget is
	// exhausted, which counts as reaching 100% even while holds keep the
	// settled spend just under the limit.
	ReasonRefused = "refused"
)

// EventType is the type field of every alert's body.
const EventType = "budget.threshold"

// Alert is one threshold a scope-period's spend reached. ID is derived
// from the unique key (tenant, scope kind, scope id, period, threshold), so
// the same crossing has the same id however often it is reported.
type Alert struct {
	ID        string
	Tenant    string
	Kind      string // budget.ScopeTenant, ScopeKey or ScopeUser
	ScopeID   string
	Window    string // "month" or "day"
	Period    string
	Threshold int // percent of Limit
	Reason    string
	Spent     int64 // USD micros, after the settle (or at the refusal)
	Limit     int64 // USD micros
	At        time.Time
}

// alertID derives an alert's id from its unique key: "ba_" and 24 hex
// digits of a SHA-256 (96 bits: collisions are not a concern at any
// number of alerts a gateway will see).
func alertID(tenant, kind, scopeID, period string, threshold int) string {
	h := sha256.New()
	for _, s := range []string{tenant, kind, scopeID, period, strconv.Itoa(threshold)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "ba_" + hex.EncodeToString(h.Sum(nil)[:12])
}

// FromCrossing is the alert of c.
func FromCrossing(c budget.Crossing) Alert {
	return newAlert(c.Tenant, c.Scope, c.Threshold, ReasonCrossed, c.After, c.At)
}

func newAlert(tenant string, s budget.Scope, threshold int, reason string, spent int64, at time.Time) Alert {
	return Alert{
		ID:     alertID(tenant, s.Kind, s.ID, s.Period, threshold),
		Tenant: tenant, Kind: s.Kind, ScopeID: s.ID, Window: s.Window.String(), Period: s.Period,
		Threshold: threshold, Reason: reason, Spent: spent, Limit: s.Limit, At: at.UTC(),
	}
}

// Payload is the JSON body POSTed for an alert. Amounts are in USD, as
// decimal numbers with up to 6 decimals, and exactly in micros.
type Payload struct {
	Type        string          `json:"type"` // EventType
	ID          string          `json:"id"`
	Tenant      string          `json:"tenant"`
	Scope       PayloadScope    `json:"scope"`
	Threshold   int             `json:"threshold"`
	Reason      string          `json:"reason"`
	SpentUSD    json.RawMessage `json:"spent_usd"`
	LimitUSD    json.RawMessage `json:"limit_usd"`
	SpentMicros int64           `json:"spent_micros"`
	LimitMicros int64           `json:"limit_micros"`
	At          time.Time       `json:"at"`
}

// PayloadScope names the budget in a Payload.
type PayloadScope struct {
	Kind   string `json:"kind"`
	ID     string `json:"id"`
	Window string `json:"window"`
	Period string `json:"period"`
}

// Body is a's JSON body.
func (a Alert) Body() []byte {
	b, err := json.Marshal(Payload{
		Type: EventType, ID: a.ID, Tenant: a.Tenant,
		Scope:     PayloadScope{Kind: a.Kind, ID: a.ScopeID, Window: a.Window, Period: a.Period},
		Threshold: a.Threshold, Reason: a.Reason,
		SpentUSD: usd(a.Spent), LimitUSD: usd(a.Limit), SpentMicros: a.Spent, LimitMicros: a.Limit,
		At: a.At,
	})
	if err != nil { // strings, ints and a UTC time always marshal
		panic(fmt.Sprintf("alerts: encoding a payload: %v", err))
	}
	return b
}

// usd writes micros as a JSON decimal number of dollars, exactly (no
// float rounding): 1500000 → 1.5, -250 → -0.00025.
func usd(micros int64) json.RawMessage {
	neg := micros < 0
	u := uint64(micros)
	if neg {
		u = -u
	}
	s := strconv.FormatUint(u/1e6, 10)
	if frac := u % 1e6; frac != 0 {
		f := fmt.Sprintf("%06d", frac)
		for f[len(f)-1] == '0' {
			f = f[:len(f)-1]
		}
		s += "." + f
	}
	if neg {
		s = "-" + s
	}
	return json.RawMessage(s)
}

// SignatureHeader is the header carrying an alert's signature.
const SignatureHeader = "Tollgate-Signature"

// Sign returns the SignatureHeader value for body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 with secret of "<t>.<body>">".
// Receivers recompute the HMAC over the timestamp and the raw body, compare
// in constant time, and refuse a timestamp too far from their clock.
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}
