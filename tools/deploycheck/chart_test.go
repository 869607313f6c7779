package deploycheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

var chartDir = filepath.Join(repo, "deploy/helm/tollgate")

// secrets names the Secrets a real install names; the chart creates none.
var secrets = []string{
	"secrets.databaseURL.existingSecret=tollgate-db",
	"secrets.adminToken.existingSecret=tollgate-admin",
	"secrets.providerKeys.OPENAI_API_KEY.existingSecret=tollgate-providers",
}

var release = Release{Name: "edge", Namespace: "llm"}

// rendering is one chart rendering through every stage of the checker.
type rendering struct {
	objs []*Object
	gw   *Gateway
}

// renderAndCheck renders the chart with secrets plus sets, decodes the
// manifests strictly, runs the semantic checks and Helm's linter, and
// validates the rendered policy with the tollgate binary.
func renderAndCheck(t *testing.T, sets ...string) rendering {
	t.Helper()
	vals, err := Values(append(append([]string{}, secrets...), sets...)...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Render(chartDir, release, vals)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(r)
	if err != nil {
		t.Fatalf("decoding the rendered manifests: %v", err)
	}
	gw, err := CheckChart(objs)
	if err != nil {
		t.Fatalf("checks:\n%v", err)
	}
	if err := Lint(chartDir, release.Namespace, vals); err != nil {
		t.Errorf("helm lint:\n%v", err)
	}
	if msg, err := ValidatePolicy(tollgateBin(t), gw.PolicyText, policyEnv(t)...); err != nil {
		t.Fatalf("the rendered policy:\n%s\n%v", gw.PolicyText, err)
	} else if strings.Contains(msg, "warning:") {
		t.Errorf("the rendered policy validates with a warning (a drain shorter than a stream?):\n%s", msg)
	} else {
		t.Log(strings.TrimSpace(msg))
	}
	return rendering{objs, gw}
}

func (r rendering) hpa(t *testing.T) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	hs := ByKind(r.objs, "HorizontalPodAutoscaler")
	if len(hs) != 1 {
		t.Fatalf("%d HPAs", len(hs))
	}
	return hs[0].Obj.(*autoscalingv2.HorizontalPodAutoscaler)
}

// TestChart renders the chart in the configurations deploy/README.md
// describes; each passes every check.
func TestChart(t *testing.T) {
	t.Run("defaults: StatefulSet with a spool volume per pod, CPU autoscaling", func(t *testing.T) {
		r := renderAndCheck(t)
		if r.gw.Workload.Kind != "StatefulSet" || len(r.gw.Claims) != 1 || r.gw.Claims[0].Name != "spool" {
			t.Fatalf("want a StatefulSet with a spool volumeClaimTemplate, got %s %v", r.gw.Workload.Kind, r.gw.Claims)
		}
		sts := r.gw.Workload.Obj.(*appsv1.StatefulSet)
		if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
			t.Errorf("podManagementPolicy %q", sts.Spec.PodManagementPolicy)
		}
		h := r.hpa(t)
		if len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].Type != autoscalingv2.ResourceMetricSourceType || *h.Spec.MinReplicas != 3 {
			t.Errorf("HPA metrics %+v min %d: want CPU only from 3", h.Spec.Metrics, *h.Spec.MinReplicas)
		}
		// The drain is the longest stream the policy allows (the default
		// upstream's timeouts.total, 10m); grace = delay 5 + drain 600 +
		// ledger 20.
		if g := *r.gw.Pod.Spec.TerminationGracePeriodSeconds; g != 625 || r.gw.DrainTimeout.Seconds() != 600 || r.gw.ShutdownDelay.Seconds() != 5 {
			t.Errorf("grace %d s, drain %v, shutdown delay %v", g, r.gw.DrainTimeout, r.gw.ShutdownDelay)
		}
		// /metrics on the admin port, announced to Prometheus, no token.
		if a := r.gw.Pod.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != "8081" || a["prometheus.io/path"] != "/metrics" {
			t.Errorf("scrape annotations %v", a)
		}
		if m := r.gw.Policy.Metrics; m.Listen != "" || m.TokenEnv != "" || m.Public {
			t.Errorf("policy metrics %+v, want the admin listener's", m)
		}
		if len(ByKind(r.objs, "Job")) != 1 || len(ByKind(r.objs, "PodDisruptionBudget")) != 1 {
			t.Errorf("want the migration Job and a PDB")
		}
		res := r.gw.Container.Resources
		if res.Requests.Memory().String() != "512Mi" || res.Limits.Memory().String() != "1Gi" {
			t.Errorf("memory %v / %v: values.yaml's measured sizes were not applied", res.Requests.Memory(), res.Limits.Memory())
		}
	})

	t.Run("Deployment with emptyDir spool, in-flight metric, Redis Cluster", func(t *testing.T) {
		r := renderAndCheck(t,
			"callLog.spool.persistence.enabled=false",
			"autoscaling.inflight.enabled=true",
			"redis.addrs={rc-0.rc:6379,rc-1.rc:6379,rc-2.rc:6379}",
			"secrets.redisPassword.existingSecret=tollgate-redis",
		)
		d, ok := r.gw.Workload.Obj.(*appsv1.Deployment)
		if !ok {
			t.Fatalf("want a Deployment, got %s", r.gw.Workload.Kind)
		}
		if d.Spec.Strategy.RollingUpdate.MaxSurge.IntValue() != 1 {
			t.Errorf("maxSurge %v", d.Spec.Strategy.RollingUpdate.MaxSurge)
		}
		h := r.hpa(t)
		if len(h.Spec.Metrics) != 2 || h.Spec.Metrics[0].Pods == nil || h.Spec.Metrics[0].Pods.Metric.Name != InflightMetric ||
			h.Spec.Metrics[0].Pods.Target.AverageValue.String() != "5k" {
			t.Errorf("HPA metrics %+v: want %s (5000 per pod) and CPU", h.Spec.Metrics, InflightMetric)
		}
		if h.Spec.ScaleTargetRef.Kind != "Deployment" {
			t.Errorf("HPA targets %s", h.Spec.ScaleTargetRef.Kind)
		}
		if got := strings.Join(r.gw.Policy.Redis.Addrs, ","); got != "rc-0.rc:6379,rc-1.rc:6379,rc-2.rc:6379" {
			t.Errorf("policy redis.addrs %q", got)
		}
		if len(ByKind(r.objs, "Service")) != 2 {
			t.Errorf("want the public and admin Services (no headless one without a StatefulSet)")
		}
	})

	t.Run("longest stream 30m, metrics on a port of their own with a token", func(t *testing.T) {
		// --set on a list element replaces the element: give it whole.
		r := renderAndCheck(t,
			"policy.upstreams[0].name=openai", "policy.upstreams[0].base_url=https://api.openai.com/v1",
			"policy.upstreams[0].api_key_env=OPENAI_API_KEY", "policy.upstreams[0].timeouts.total=30m",
			"metrics.port=9090", "metrics.token.existingSecret=tollgate-metrics", "metrics.maxTenants=0",
		)
		if g := *r.gw.Pod.Spec.TerminationGracePeriodSeconds; g != 1825 || r.gw.DrainTimeout.Seconds() != 1800 {
			t.Errorf("grace %d s, drain %v: want 1825 s, 30m", g, r.gw.DrainTimeout)
		}
		if m := r.gw.Policy.Metrics; m.Listen != "0.0.0.0:9090" || m.TokenEnv != "TOLLGATE_METRICS_TOKEN" {
			t.Errorf("policy metrics %+v", m)
		}
		if r.gw.Pod.Annotations["prometheus.io/port"] != "9090" {
			t.Errorf("scrape annotations %v", r.gw.Pod.Annotations)
		}
		if !strings.Contains(r.gw.PolicyText, "max_tenants: 0") {
			t.Errorf("policy without max_tenants: 0:\n%s", r.gw.PolicyText)
		}
	})

	t.Run("fixed replicas, no admin API, no HPA", func(t *testing.T) {
		r := renderAndCheck(t,
			"autoscaling.enabled=false", "replicaCount=4", "admin.enabled=false",
			"secrets.adminToken.existingSecret=", "pdb.minAvailable=3",
		)
		if r.gw.Replicas == nil || *r.gw.Replicas != 4 || len(ByKind(r.objs, "HorizontalPodAutoscaler")) != 0 {
			t.Errorf("replicas %v", r.gw.Replicas)
		}
		if r.gw.Policy.Admin.Listen != "" {
			t.Errorf("admin.listen %q with the admin API off", r.gw.Policy.Admin.Listen)
		}
		for _, e := range r.gw.Container.Env {
			if e.Name == "TOLLGATE_ADMIN_TOKEN" {
				t.Errorf("admin token wired without the admin API")
			}
		}
	})
}

// TestChartRejects: every stage of the checker refuses a broken chart,
// broken values or a broken manifest, with a message that says what.
func TestChartRejects(t *testing.T) {
	type stage int
	const (
		atRender stage = iota
		atDecode
		atCheck
		atValidate
	)
	tests := []struct {
		name   string
		sets   []string
		edit   func(files map[string]string) // applied to the rendered files
		broken string                        // a template added to a copy of the chart
		at     stage
		want   string
	}{
		{name: "no database Secret", sets: []string{"secrets.databaseURL.existingSecret="}, at: atRender,
			want: "secrets.databaseURL.existingSecret"},
		{name: "PDB as large as the replica floor", sets: []string{"pdb.minAvailable=3"}, at: atRender,
			want: "pdb.minAvailable (3) must be below"},
		{name: "template syntax error", broken: "{{ if .Values.admin.enabled }}\nkind: ConfigMap\n", at: atRender,
			want: "unexpected EOF"},
		{name: "misspelt field", edit: replaceIn("workload.yaml", "readinessProbe:", "readinesProbe:"), at: atDecode,
			want: `unknown field "readinesProbe"`},
		{name: "wrong type", edit: replaceIn("workload.yaml", "revisionHistoryLimit: 5", "revisionHistoryLimit: five"), at: atDecode,
			want: "revisionHistoryLimit"},
		{name: "bad quantity", sets: []string{"resources.limits.memory=1Gb"}, at: atDecode, want: "quantities must match"},
		{name: "duplicate key", edit: replaceIn("workload.yaml", "revisionHistoryLimit: 5", "revisionHistoryLimit: 5\n  revisionHistoryLimit: 6"), at: atDecode,
			want: "revisionHistoryLimit"},
		{name: "invalid name", sets: []string{"fullnameOverride=Edge_Gateway"}, at: atDecode, want: "RFC 1123"},
		{name: "kind the checker does not know", broken: "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: x}\n", at: atDecode,
			want: `kind "Ingress" is not a kind this checker validates`},
		{name: "grace period shorter than the drain", sets: []string{"terminationGracePeriodSeconds=600"}, at: atRender,
			want: "terminationGracePeriodSeconds (600) is shorter than drain.shutdownDelaySeconds + the drain + drain.ledgerFlushSeconds (625)"},
		{name: "grace period shorter than the drain, past the template", edit: replaceIn("workload.yaml", "terminationGracePeriodSeconds: 625", "terminationGracePeriodSeconds: 30"), at: atCheck,
			want: "terminationGracePeriodSeconds 30 is not longer than -shutdown-delay 5s + drain_timeout 10m0s"},
		{name: "drain shorter than the longest stream", sets: []string{"drain.timeoutSeconds=60"}, at: atRender,
			want: "drain.timeoutSeconds (60) is shorter than the longest stream the policy allows (600s"},
		{name: "drain shorter than the longest stream, past the template", edit: replaceIn("configmap.yaml", "drain_timeout: 600s", "drain_timeout: 60s"), at: atCheck,
			want: "drain_timeout 1m0s is shorter than upstream openai's timeouts.total 10m0s"},
		{name: "a total timeout that is not a duration", sets: []string{"policy.upstreams[0].timeouts.total=10 minutes"}, at: atRender,
			want: `policy.upstreams[0].timeouts.total: "10 minutes" is not a duration`},
		{name: "in-flight autoscaling without metrics", sets: []string{"admin.enabled=false", "autoscaling.inflight.enabled=true"}, at: atRender,
			want: "autoscaling.inflight.enabled needs /metrics"},
		{name: "metrics port the container lacks", edit: replaceIn("configmap.yaml", "max_tenants: 100", "max_tenants: 100\n      listen: 0.0.0.0:9090"), at: atCheck,
			want: `container port "metrics" is 0, the policy's metrics.listen listens on 9090`},
		{name: "metrics on the public listener", edit: replaceIn("configmap.yaml", "max_tenants: 100", "max_tenants: 100\n      public: true"), at: atCheck,
			want: "policy metrics.public"},
		{name: "liveness on the readiness endpoint", sets: []string{"probes.liveness.path=/readyz"}, at: atCheck,
			want: "liveness probe must be GET /healthz"},
		{name: "impatient liveness", sets: []string{"probes.liveness.failureThreshold=1"}, at: atCheck, want: "is not generous"},
		{name: "listener closes before readiness is noticed", sets: []string{"drain.shutdownDelaySeconds=1"}, at: atCheck,
			want: "-shutdown-delay 1s is shorter than the readiness probe"},
		{name: "provider key as a literal", sets: []string{"extraEnv[0].name=OPENAI_API_KEY", "extraEnv[0].value=sk-live"}, at: atCheck,
			want: "env OPENAI_API_KEY set twice"},
		{name: "no memory request", sets: []string{"resources.requests.memory=null"}, at: atCheck, want: "no memory request"},
		{name: "replicas beside an HPA", edit: replaceIn("workload.yaml", "  revisionHistoryLimit: 5", "  replicas: 3\n  revisionHistoryLimit: 5"), at: atCheck,
			want: "sets replicas while an HPA scales it"},
		{name: "Service targets a port the pod lacks", edit: replaceIn("service.yaml", "targetPort: http", "targetPort: web"), at: atCheck,
			want: "targets web"},
		{name: "plugin cache not warmed", edit: replaceIn("workload.yaml", "- warm", "- wrm"), at: atCheck,
			want: "no init container runs `tollgate plugin warm`"},
		{name: "plugin cache warmed where the gateway does not look", edit: replaceIn("workload.yaml", "- /warm/wazero", "- /warm/other"), at: atCheck,
			want: `-cache-dir "/warm/other" is volume "cache" at "other", but the gateway's plugin_runtime.cache_dir is volume "cache" at "wazero"`},
		{name: "plugin cache seeded from elsewhere", edit: replaceIn("workload.yaml", "- /var/cache/tollgate/wazero", "- /tmp/wazero"), at: atCheck,
			want: `-seed "/tmp/wazero", want the image's cache /var/cache/tollgate/wazero`},
		{name: "admin client CA without admin TLS", sets: []string{"tls.admin.clientCA.secretName=ops-ca", "tls.admin.clientAuth=require"}, at: atRender,
			want: "tls.admin.clientCA.secretName needs tls.admin.secretName"},
		{name: "admin mutual TLS without a client CA", sets: []string{"tls.admin.secretName=adm", "tls.admin.clientAuth=require"}, at: atRender,
			want: "tls.admin.clientAuth require needs tls.admin.clientCA.secretName"},
		{name: "admin client CA that is never asked for", sets: []string{"tls.admin.secretName=adm", "tls.admin.clientCA.secretName=ops-ca"}, at: atRender,
			want: "tls.admin.clientCA.secretName is set but tls.admin.clientAuth is none"},
		{name: "admin TLS without the admin API", sets: []string{"admin.enabled=false", "secrets.adminToken.existingSecret=", "tls.admin.secretName=adm"}, at: atRender,
			want: "tls.admin.secretName is set but admin.enabled is false"},
		{name: "TLS 1.1", sets: []string{"tls.server.secretName=gw", "tls.server.minVersion=1.1"}, at: atRender,
			want: `tls.server.minVersion must be "1.2" or "1.3", got "1.1"`},
		{name: "server.tls in the policy values", sets: []string{"policy.server.tls.cert_file=/x.crt"}, at: atRender,
			want: "policy.server.tls: set tls.server.secretName instead"},
		{name: "Redis CA without Redis TLS", sets: []string{"redis.tls.ca.secretName=redis-ca"}, at: atRender,
			want: "need redis.tls.enabled"},
		{name: "Postgres CA that verifies nothing", sets: []string{"postgres.ca.secretName=pg-ca", "postgres.sslMode=prefer"}, at: atRender,
			want: `postgres.ca.secretName needs postgres.sslMode verify-full (or verify-ca, require), got "prefer"`},
		{name: "Postgres sslmode misspelt", sets: []string{"postgres.sslMode=verify_full"}, at: atRender,
			want: `postgres.sslMode must be disable, allow, prefer, require, verify-ca or verify-full, got "verify_full"`},
		{name: "plain HTTP probes on a TLS listener", sets: tlsOn, edit: replaceAll("workload.yaml", "scheme: HTTPS", "scheme: HTTP"), at: atCheck,
			want: "probe scheme HTTP, but the public listener is HTTPS"},
		{name: "HTTPS probes on a plain listener", edit: replaceAll("workload.yaml", "scheme: HTTP", "scheme: HTTPS"), at: atCheck,
			want: "probe scheme HTTPS, but the public listener is HTTP"},
		{name: "certificate Secret mounted with subPath", sets: tlsOn,
			edit: replaceIn("workload.yaml", "mountPath: /etc/tollgate/tls/server\n", "mountPath: /etc/tollgate/tls/server\n              subPath: tls.crt\n"), at: atCheck,
			want: "tls-server is mounted with subPath"},
		{name: "policy names a file no Secret holds", sets: tlsOn, edit: replaceIn("configmap.yaml", "/server/tls.crt", "/server/cert.pem"), at: atCheck,
			want: "policy server.tls.cert_file /etc/tollgate/tls/server/cert.pem: Secret tollgate-tls's items put no file at cert.pem"},
		{name: "Postgres CA not mounted in the migration", sets: tlsOn, edit: replaceIn("migrate-job.yaml", "mountPath: /etc/tollgate/tls/postgres-ca", "mountPath: /etc/tollgate/tls/pg-ca"), at: atCheck,
			want: "env PGSSLROOTCERT /etc/tollgate/tls/postgres-ca/ca.crt is on no volume"},
		{name: "admin TLS scraped over HTTP", sets: tlsOn, edit: replaceIn("workload.yaml", "prometheus.io/scheme: https", "prometheus.io/scheme: http"), at: atCheck,
			want: `prometheus.io/scheme is "http"`},
		{name: "policy routes to no upstream", sets: []string{"policy.routes[0].upstream=anthropic"}, at: atValidate,
			want: "routes[0].upstream"},
		{name: "policy with an unknown key", sets: []string{"policy.server.max_body=1MiB"}, at: atValidate, want: "unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := chartDir
			if tc.broken != "" {
				dir = copyChart(t)
				if err := os.WriteFile(filepath.Join(dir, "templates", "broken.yaml"), []byte(tc.broken), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			vals, err := Values(append(append([]string{}, secrets...), tc.sets...)...)
			if err != nil {
				t.Fatal(err)
			}
			got := func(s stage, err error) {
				t.Helper()
				if err == nil {
					return
				}
				if s != tc.at || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("stage %d (want %d) failed with:\n%v\nwant a message containing %q", s, tc.at, err, tc.want)
				}
				t.Logf("rejected: %s", firstLine(err.Error()))
				tc.at = -1 // seen
			}
			r, err := Render(dir, release, vals)
			if got(atRender, err); err == nil {
				if tc.edit != nil {
					tc.edit(r.Files)
				}
				objs, err := Decode(r)
				if got(atDecode, err); err == nil {
					gw, err := CheckChart(objs)
					if got(atCheck, err); err == nil {
						_, err := ValidatePolicy(tollgateBin(t), gw.PolicyText, policyEnv(t)...)
						got(atValidate, err)
					}
				}
			}
			if tc.at != -1 {
				t.Fatalf("accepted; want a rejection mentioning %q", tc.want)
			}
		})
	}
}

// replaceIn edits the rendered template whose name ends with file.
func replaceIn(file, from, to string) func(map[string]string) {
	return func(files map[string]string) {
		for name, text := range files {
			if strings.HasSuffix(name, "/"+file) {
				if !strings.Contains(text, from) {
					panic(file + " has no " + from)
				}
				files[name] = strings.Replace(text, from, to, 1)
			}
		}
	}
}

// replaceAll edits every occurrence in the rendered template whose name
// ends with file.
func replaceAll(file, from, to string) func(map[string]string) {
	return func(files map[string]string) {
		for name, text := range files {
			if strings.HasSuffix(name, "/"+file) {
				if !strings.Contains(text, from) {
					panic(file + " has no " + from)
				}
				files[name] = strings.ReplaceAll(text, from, to)
			}
		}
	}
}

// copyChart copies the chart to a temporary directory.
func copyChart(t *testing.T) string {
	dst := filepath.Join(t.TempDir(), "tollgate")
	err := filepath.WalkDir(chartDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(chartDir, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		return copyFile(p, filepath.Join(dst, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestGatewayEnvNeverLiteral: the chart's every secret reaches the pod by
// reference; no Secret value is rendered anywhere.
func TestGatewayEnvNeverLiteral(t *testing.T) {
	r := renderAndCheck(t, "secrets.redisPassword.existingSecret=tollgate-redis")
	refs := map[string]string{}
	for _, e := range r.gw.Container.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	want := map[string]string{
		"TOLLGATE_DATABASE_URL":   "tollgate-db/url",
		"TOLLGATE_ADMIN_TOKEN":    "tollgate-admin/token",
		"TOLLGATE_REDIS_PASSWORD": "tollgate-redis/password",
		"OPENAI_API_KEY":          "tollgate-providers/api-key",
	}
	for k, v := range want {
		if refs[k] != v {
			t.Errorf("env %s from %q, want %q", k, refs[k], v)
		}
	}
	// A rendered Secret would not even decode: Secret is not among the
	// kinds the checker accepts.
}
