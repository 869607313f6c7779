package config

import (
	"net/url"
	"time"
)

// Alerts configures budget alerts: each alert threshold a budget's spend
// reaches in a period (a plan's budgets name the thresholds) is POSTed,
// signed, to one webhook, from a durable outbox with the Postgres store
// (docs/POLICY.md, "Budget alerts").
type Alerts struct {
	// WebhookURL receives every alert as a JSON POST (http or https);
	// empty turns alerts off.
	WebhookURL string `yaml:"webhook_url"`
	// SecretEnv names the environment variable holding the secret that
	// signs every delivery (default TOLLGATE_ALERTS_SECRET; at least 16
	// bytes, required with a webhook_url). The secret is never written in
	// the policy and never logged.
	SecretEnv string `yaml:"secret_env"`
	// Timeout bounds one delivery attempt (default 5s, at most 1m); a
	// slower answer counts as a failure and is retried.
	Timeout time.Duration `yaml:"timeout"`
	// MaxAge is how long an alert is retried, with exponential backoff
	// (1s doubling up to 5m, jittered), before it is given up and counted
	// (default 24h, at least 1m).
	MaxAge time.Duration `yaml:"max_age"`
	// QueueSize bounds the alerts waiting in the gateway to be stored in
	// the outbox (default 1024); a settle that finds it full waits for
	// room rather than drop an alert.
	QueueSize int `yaml:"queue_size"`

	Secret string `yaml:"-"` // resolved from SecretEnv; never logged
}

// Enabled reports whether alerts are delivered.
func (a *Alerts) Enabled() bool { return a.WebhookURL != "" }

// Defaults of the alerts section.
const (
	DefaultAlertsTimeout   = 5 * time.Second
	DefaultAlertsMaxAge    = 24 * time.Hour
	DefaultAlertsQueueSize = 1024
	minAlertsSecret        = 16
)

func (p *Policy) applyAlertsDefaults() {
	a := &p.Alerts
	setDefault(&a.SecretEnv, "TOLLGATE_ALERTS_SECRET")
	setDefault(&a.Timeout, DefaultAlertsTimeout)
	setDefault(&a.MaxAge, DefaultAlertsMaxAge)
	setDefault(&a.QueueSize, DefaultAlertsQueueSize)
}

func (p *Policy) validateAlerts(lookupEnv func(string) (string, bool), ps *Problems) {
	a := &p.Alerts
	if a.Timeout <= 0 || a.Timeout > time.Minute {
		ps.add("alerts.timeout", "must be between 0s (default) and 1m, got %s", a.Timeout)
	}
	if a.MaxAge < time.Minute {
		ps.add("alerts.max_age", "must be at least 1m, got %s", a.MaxAge)
	}
	if a.QueueSize < 0 {
		ps.add("alerts.queue_size", "must not be negative")
	}
	if !a.Enabled() {
		return
	}
	u, err := url.Parse(a.WebhookURL)
	switch {
	case err != nil:
		ps.add("alerts.webhook_url", "not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		ps.add("alerts.webhook_url", "scheme must be http or https, got %q", u.Scheme)
	case u.Host == "":
		ps.add("alerts.webhook_url", "has no host")
	}
	a.Secret, _ = lookupEnv(a.SecretEnv)
	if len(a.Secret) < minAlertsSecret {
		ps.add("alerts.secret_env", "environment variable %s must hold the webhook's signing secret, at least %d bytes (has %d)",
			a.SecretEnv, minAlertsSecret, len(a.Secret))
	}
}
