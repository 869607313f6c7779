package deploycheck

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// tlsOn turns on every TLS setting of the chart, each from its own Secret.
var tlsOn = []string{
	"tls.server.secretName=tollgate-tls",
	"tls.server.minVersion=1.3",
	"tls.admin.secretName=tollgate-admin-tls",
	"tls.admin.clientAuth=require",
	"tls.admin.clientCA.secretName=ops-ca",
	"redis.tls.enabled=true",
	"redis.tls.serverName=redis.llm.svc",
	"redis.tls.ca.secretName=redis-ca",
	"redis.tls.ca.key=ca.pem",
	"redis.tls.clientCert.secretName=tollgate-redis-client",
	"redis.username=tollgate",
	"secrets.redisPassword.existingSecret=tollgate-redis",
	"postgres.sslMode=verify-full",
	"postgres.ca.secretName=postgres-ca",
	"postgres.clientCert.secretName=tollgate-postgres-client",
}

var tlsFiles struct {
	once sync.Once
	err  error
}

// tlsFixture writes, once, the files the chart's Secrets would hold, in
// the layout the chart mounts them in (dir/server/tls.crt, ...), so that
// `tollgate validate` loads the rendered policy's TLS files as the gateway
// would in the pod.
func tlsFixture(t *testing.T, dir string) string {
	t.Helper()
	tlsFiles.once.Do(func() { tlsFiles.err = writeTLSFixture(dir) })
	if tlsFiles.err != nil {
		t.Fatalf("TLS fixture: %v", tlsFiles.err)
	}
	return dir
}

func writeTLSFixture(dir string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "deploycheck CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	write := func(rel string, data []byte) error {
		f := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		return os.WriteFile(f, data, 0o600)
	}
	pair := func(sub string, serial int64, usage x509.ExtKeyUsage, dns ...string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: sub},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: dns}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		if err := write(sub+"/tls.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
			return err
		}
		return write(sub+"/tls.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	}
	for i, p := range []struct {
		sub   string
		usage x509.ExtKeyUsage
		dns   []string
	}{
		{"server", x509.ExtKeyUsageServerAuth, []string{"tollgate.llm.svc"}},
		{"admin", x509.ExtKeyUsageServerAuth, []string{"tollgate-admin.llm.svc"}},
		{"redis-client", x509.ExtKeyUsageClientAuth, nil},
		{"postgres-client", x509.ExtKeyUsageClientAuth, nil},
	} {
		if err := pair(p.sub, int64(i+2), p.usage, p.dns...); err != nil {
			return err
		}
	}
	for _, sub := range []string{"admin-client-ca", "redis-ca", "postgres-ca"} {
		if err := write(sub+"/ca.crt", caPEM); err != nil {
			return err
		}
	}
	return nil
}

// TestChartTLS renders the chart with TLS off (the defaults) and with TLS
// everywhere, and checks beyond CheckChart (which both pass) that the
// policy's files, the mounts, the Secrets and the probes agree; the
// rendered policy is validated by the tollgate binary against files laid
// out as the Secrets are mounted.
func TestChartTLS(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		r := renderAndCheck(t)
		p := r.gw.Policy
		if p.Server.TLS != nil || p.Admin.TLS != nil || p.Redis.TLS != nil {
			t.Errorf("TLS in the policy with TLS off: server %+v admin %+v redis %+v", p.Server.TLS, p.Admin.TLS, p.Redis.TLS)
		}
		for _, pr := range []*corev1.Probe{r.gw.Container.ReadinessProbe, r.gw.Container.LivenessProbe, r.gw.Container.StartupProbe} {
			if pr.HTTPGet.Scheme != corev1.URISchemeHTTP {
				t.Errorf("probe %s scheme %q, want HTTP", pr.HTTPGet.Path, pr.HTTPGet.Scheme)
			}
		}
		for _, v := range r.gw.Pod.Spec.Volumes {
			if v.Secret != nil {
				t.Errorf("Secret volume %s with TLS off", v.Name)
			}
		}
		for _, e := range r.gw.Container.Env {
			if strings.HasPrefix(e.Name, "PGSSL") {
				t.Errorf("env %s with postgres TLS unset: it would override the connection string", e.Name)
			}
		}
		if _, ok := r.gw.Pod.Annotations["prometheus.io/scheme"]; ok {
			t.Errorf("prometheus.io/scheme with the admin listener on plain HTTP")
		}
	})

	t.Run("everywhere", func(t *testing.T) {
		r := renderAndCheck(t, tlsOn...)
		p := r.gw.Policy
		dir := "/etc/tollgate/tls"
		// Each file the policy names, where it is mounted from.
		want := []struct {
			what, file, secret, key string
		}{
			{"server.tls.cert_file", p.Server.TLS.CertFile, "tollgate-tls", "tls.crt"},
			{"server.tls.key_file", p.Server.TLS.KeyFile, "tollgate-tls", "tls.key"},
			{"admin.tls.cert_file", p.Admin.TLS.CertFile, "tollgate-admin-tls", "tls.crt"},
			{"admin.tls.client_ca_file", p.Admin.TLS.ClientCAFile, "ops-ca", "ca.crt"},
			{"redis.tls.ca_file", p.Redis.TLS.CAFile, "redis-ca", "ca.pem"},
			{"redis.tls.cert_file", p.Redis.TLS.CertFile, "tollgate-redis-client", "tls.crt"},
			{"redis.tls.key_file", p.Redis.TLS.KeyFile, "tollgate-redis-client", "tls.key"},
		}
		for _, w := range want {
			file := ExpandDefaults(w.file)
			if !strings.HasPrefix(file, dir+"/") {
				t.Errorf("%s %q is not under %s", w.what, file, dir)
				continue
			}
			secret, key := secretFileOf(r.gw.Container, r.gw.Pod.Spec.Volumes, file)
			if secret != w.secret || key != w.key {
				t.Errorf("%s %s comes from Secret %q key %q, want %q key %q", w.what, file, secret, key, w.secret, w.key)
			}
		}
		// Keys readable by the gateway's group (fsGroup) only: YAML's 0440
		// must reach the API as octal.
		for _, v := range r.gw.Pod.Spec.Volumes {
			if v.Secret != nil && (v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o440) {
				t.Errorf("Secret volume %s mode %v, want 0440", v.Name, v.Secret.DefaultMode)
			}
		}
		if fs := r.gw.Pod.Spec.SecurityContext.FSGroup; fs == nil || *fs != 65532 {
			t.Errorf("fsGroup %v: the gateway's group could not read the 0440 Secret files", fs)
		}
		if p.Server.TLS.MinVersion != "1.3" || p.Admin.TLS.MinVersion != "1.2" || p.Admin.TLS.ClientAuth != "require" ||
			p.Redis.TLS.ServerName != "redis.llm.svc" || p.Redis.Username != "tollgate" || p.Redis.PasswordEnv != "TOLLGATE_REDIS_PASSWORD" {
			t.Errorf("policy server.tls %+v admin.tls %+v redis %+v", p.Server.TLS, p.Admin.TLS, p.Redis)
		}
		for _, pr := range []*corev1.Probe{r.gw.Container.ReadinessProbe, r.gw.Container.LivenessProbe, r.gw.Container.StartupProbe} {
			if pr.HTTPGet.Scheme != corev1.URISchemeHTTPS {
				t.Errorf("probe %s scheme %q, want HTTPS", pr.HTTPGet.Path, pr.HTTPGet.Scheme)
			}
		}
		if r.gw.Pod.Annotations["prometheus.io/scheme"] != "https" {
			t.Errorf("scrape annotations %v: want https (metrics on the admin listener, which is TLS)", r.gw.Pod.Annotations)
		}
		// Postgres through libpq's variables, in the gateway and the
		// migration, from the Secrets mounted in each.
		jobs := ByKind(r.objs, "Job")
		if len(jobs) != 1 {
			t.Fatalf("%d Jobs", len(jobs))
		}
		job := jobs[0].Obj.(*batchv1.Job).Spec.Template.Spec
		for _, ct := range []struct {
			c       *corev1.Container
			volumes []corev1.Volume
		}{{r.gw.Container, r.gw.Pod.Spec.Volumes}, {&job.Containers[0], job.Volumes}} {
			env := map[string]string{}
			for _, e := range ct.c.Env {
				env[e.Name] = e.Value
			}
			if env["PGSSLMODE"] != "verify-full" {
				t.Errorf("container %s: PGSSLMODE %q", ct.c.Name, env["PGSSLMODE"])
			}
			for name, w := range map[string][2]string{
				"PGSSLROOTCERT": {"postgres-ca", "ca.crt"},
				"PGSSLCERT":     {"tollgate-postgres-client", "tls.crt"},
				"PGSSLKEY":      {"tollgate-postgres-client", "tls.key"},
			} {
				if s, k := secretFileOf(ct.c, ct.volumes, env[name]); s != w[0] || k != w[1] {
					t.Errorf("container %s: %s %q from Secret %q key %q, want %v", ct.c.Name, name, env[name], s, k, w)
				}
			}
		}
	})
}

// secretFileOf returns the Secret and key file comes from in ct ("" when
// it is not on a Secret volume, or the Secret's items do not put it there).
func secretFileOf(ct *corev1.Container, volumes []corev1.Volume, file string) (secret, key string) {
	for _, m := range ct.VolumeMounts {
		rel, ok := strings.CutPrefix(file, m.MountPath+"/")
		if !ok || m.SubPath != "" {
			continue
		}
		for _, v := range volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			if len(v.Secret.Items) == 0 {
				return v.Secret.SecretName, rel
			}
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					return v.Secret.SecretName, it.Key
				}
			}
		}
	}
	return "", ""
}
