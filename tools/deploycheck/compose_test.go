package deploycheck

import (
	"path/filepath"
	"strings"
	"testing"
)

var composeFile = filepath.Join(repo, "deploy/docker/compose.yaml")

var composeWant = ComposeExpect{
	Gateway:      "gateway",
	Migrate:      "migrate",
	HealthyDeps:  []string{"redis"},
	PolicyTarget: "/etc/tollgate/compose/policy.yaml",
	PolicySource: filepath.Join(repo, "deploy/docker/policy.yaml"),
	Env:          []string{"TOLLGATE_DATABASE_URL", "TOLLGATE_ADMIN_TOKEN", "TOLLGATE_REDIS_ADDR", "TOLLGATE_MOCK_URL"},
}

// TestCompose loads deploy/docker/compose.yaml as `docker compose config`
// does and checks the stack's shape.
func TestCompose(t *testing.T) {
	p, err := LoadCompose(composeFile, nil, map[string]string{"TOLLGATE_ADMIN_TOKEN": "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckCompose(p, composeWant); err != nil {
		t.Fatal(err)
	}
	names := p.ServiceNames()
	for _, want := range []string{"postgres", "redis", "mockllm", "migrate", "gateway"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("no %s service (have %v)", want, names)
		}
	}
	pg, _ := p.GetService("postgres")
	if pg.Image != "postgres:15" || pg.HealthCheck == nil {
		t.Errorf("postgres: image %q, healthcheck %v: want postgres:15 with a healthcheck", pg.Image, pg.HealthCheck)
	}
	rd, _ := p.GetService("redis")
	if rd.Image != "redis:7" || !strings.Contains(strings.Join(rd.Command, " "), "--maxmemory-policy noeviction") {
		t.Errorf("redis: image %q command %q: want redis:7 with noeviction", rd.Image, rd.Command)
	}
	mig, _ := p.GetService("migrate")
	if dep, ok := mig.DependsOn["postgres"]; !ok || dep.Condition != "service_healthy" {
		t.Errorf("migrate does not wait for a healthy postgres: %+v", mig.DependsOn)
	}
	gw, _ := p.GetService("gateway")
	if v := gw.Environment["TOLLGATE_REDIS_ADDR"]; v == nil || *v != "redis:6379" {
		t.Errorf("TOLLGATE_REDIS_ADDR defaults to %v, want redis:6379", v)
	}
	// ${TOLLGATE_REDIS_ADDR} reaches the gateway from the caller.
	p2, err := LoadCompose(composeFile, nil, map[string]string{"TOLLGATE_ADMIN_TOKEN": "t", "TOLLGATE_REDIS_ADDR": "10.0.0.5:6380"})
	if err != nil {
		t.Fatal(err)
	}
	if gw2, _ := p2.GetService("gateway"); *gw2.Environment["TOLLGATE_REDIS_ADDR"] != "10.0.0.5:6380" {
		t.Errorf("TOLLGATE_REDIS_ADDR not taken from the environment: %v", *gw2.Environment["TOLLGATE_REDIS_ADDR"])
	}
}

// TestComposeRejects shows the compose checks can fail.
func TestComposeRejects(t *testing.T) {
	text := mustRead(t, composeFile)
	tests := []struct {
		name     string
		from, to string
		env      map[string]string
		want     string
	}{
		{name: "no admin token", want: "TOLLGATE_ADMIN_TOKEN"},
		{name: "redis without healthcheck", from: "test: [\"CMD\", \"redis-cli\", \"ping\"]", to: "disable: true",
			want: "redis: no healthcheck"},
		{name: "depends on a missing service", from: "      mockllm:\n        condition: service_started",
			to: "      mock:\n        condition: service_started", want: "mock"},
		{name: "gateway before migrate finished", from: "condition: service_completed_successfully",
			to: "condition: service_started", want: "depends_on migrate"},
		{name: "unknown key", from: "stop_grace_period: 330s", to: "stop_grace_periodd: 330s", want: "stop_grace_periodd"},
		{name: "admin API on every interface", from: `"127.0.0.1:8081:8081"`, to: `"8081:8081"`, want: "not the host's loopback"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(text, tc.from, tc.to, 1)
			if tc.from != "" && bad == text {
				t.Fatalf("%q not found in compose.yaml", tc.from)
			}
			env := tc.env
			if env == nil && tc.name != "no admin token" {
				env = map[string]string{"TOLLGATE_ADMIN_TOKEN": "t"}
			}
			p, err := LoadCompose(composeFile, []byte(bad), env)
			if err == nil {
				err = CheckCompose(p, composeWant)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error mentioning %q, got %v", tc.want, err)
			}
			t.Logf("rejected: %v", firstLine(err.Error()))
		})
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
