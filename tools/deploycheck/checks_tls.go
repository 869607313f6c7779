package deploycheck

import (
	"path"
	"slices"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// libpqFiles are the variables through which the chart gives Postgres's
// TLS files to pgx (the policy has no Postgres TLS section).
var libpqFiles = []string{"PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY"}

// tls checks what ties TLS in the policy to the pod: every certificate,
// key and CA file the policy names is in a Secret volume mounted
// read-only, whole (a subPath mount never sees a renewed Secret, and the
// gateway reloads only what changes on disk), in the gateway and in the
// init container that loads the same policy; so are the files the libpq
// variables name, in the gateway and in the migration Job; the probes use
// HTTPS exactly when the public listener is TLS; and Prometheus is told to
// scrape an admin listener on TLS over HTTPS.
func (c *chartCheck) tls() {
	p := c.gw.Policy
	sections := map[string]*PolicyTLS{"server.tls": p.Server.TLS, "admin.tls": p.Admin.TLS, "redis.tls": p.Redis.TLS}
	names := make([]string, 0, len(sections))
	for n := range sections {
		names = append(names, n)
	}
	sort.Strings(names)
	var policyFiles [][2]string // YAML path, file
	for _, n := range names {
		files := sections[n].Files()
		keys := make([]string, 0, len(files))
		for k := range files {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			policyFiles = append(policyFiles, [2]string{n + "." + k, ExpandDefaults(files[k])})
		}
	}
	if t := p.Admin.TLS; t != nil && t.ClientAuth != "" && t.ClientAuth != "none" && t.ClientCAFile == "" {
		c.fail("policy admin.tls.client_auth %s without client_ca_file", t.ClientAuth)
	}
	containers := []*corev1.Container{c.gw.Container}
	for i := range c.gw.Pod.Spec.InitContainers {
		ic := &c.gw.Pod.Spec.InitContainers[i]
		if slices.Contains(ic.Args, "-policy") {
			containers = append(containers, ic) // warm-plugins loads the policy, TLS files included
		}
	}
	for _, ct := range containers {
		for _, f := range policyFiles {
			c.secretFile(c.gw.Workload.String(), ct, c.gw.Pod.Spec.Volumes, c.gw.Pod.Spec.SecurityContext, "policy "+f[0], f[1])
		}
	}
	c.libpqFiles(c.gw.Workload.String(), c.gw.Container, &c.gw.Pod.Spec)
	for _, o := range ByKind(c.objs, "Job") {
		spec := &o.Obj.(*batchv1.Job).Spec.Template.Spec
		for i := range spec.Containers {
			c.libpqFiles(o.String(), &spec.Containers[i], spec)
		}
	}

	want := corev1.URISchemeHTTP
	if p.Server.TLS != nil {
		want = corev1.URISchemeHTTPS
	}
	ct := c.gw.Container
	for _, np := range []struct {
		name string
		pr   *corev1.Probe
	}{{"readiness", ct.ReadinessProbe}, {"liveness", ct.LivenessProbe}, {"startup", ct.StartupProbe}} {
		name, pr := np.name, np.pr
		if pr == nil || pr.HTTPGet == nil {
			continue
		}
		got := pr.HTTPGet.Scheme
		if got == "" {
			got = corev1.URISchemeHTTP
		}
		if got != want {
			c.fail("%s: %s probe scheme %s, but the public listener is %s (server.tls %s): every probe would fail",
				c.gw.Workload, name, got, want, map[bool]string{true: "set", false: "unset"}[p.Server.TLS != nil])
		}
	}
	a := c.gw.Pod.Annotations
	if p.Metrics.Listen == "" && p.Admin.TLS != nil && a["prometheus.io/scrape"] == "true" && a["prometheus.io/scheme"] != "https" {
		c.fail("%s: /metrics is on the admin listener, which serves TLS, but prometheus.io/scheme is %q: Prometheus would scrape it over HTTP", c.gw.Workload, a["prometheus.io/scheme"])
	}
}

// libpqFiles checks the files the libpq TLS variables of ct name.
func (c *chartCheck) libpqFiles(owner string, ct *corev1.Container, spec *corev1.PodSpec) {
	for _, e := range ct.Env {
		if slices.Contains(libpqFiles, e.Name) {
			c.secretFile(owner, ct, spec.Volumes, spec.SecurityContext, "env "+e.Name, e.Value)
		}
	}
}

// secretFile checks that file is in a Secret volume mounted read-only and
// whole in ct, that the Secret puts a file of that name there, and that
// the gateway's user can read it.
func (c *chartCheck) secretFile(owner string, ct *corev1.Container, volumes []corev1.Volume, psc *corev1.PodSecurityContext, what, file string) {
	if !path.IsAbs(file) {
		c.fail("%s: container %s: %s %q is not an absolute path", owner, ct.Name, what, file)
		return
	}
	var m *corev1.VolumeMount
	for i, vm := range ct.VolumeMounts {
		if strings.HasPrefix(file, strings.TrimSuffix(vm.MountPath, "/")+"/") && (m == nil || len(vm.MountPath) > len(m.MountPath)) {
			m = &ct.VolumeMounts[i]
		}
	}
	if m == nil {
		c.fail("%s: container %s: %s %s is on no volume (the image has no such file)", owner, ct.Name, what, file)
		return
	}
	var sec *corev1.SecretVolumeSource
	for _, v := range volumes {
		if v.Name == m.Name {
			sec = v.Secret
		}
	}
	switch {
	case sec == nil:
		c.fail("%s: container %s: %s %s is on volume %q, which is not a Secret", owner, ct.Name, what, file, m.Name)
		return
	case m.SubPath != "" || m.SubPathExpr != "":
		c.fail("%s: container %s: %s is mounted with subPath: a renewed Secret never reaches the pod", owner, ct.Name, m.Name)
	case !m.ReadOnly:
		c.fail("%s: container %s: volume %s (%s) is not mounted read-only", owner, ct.Name, m.Name, what)
	}
	rel := strings.TrimPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
	if len(sec.Items) > 0 {
		found := false
		for _, it := range sec.Items {
			found = found || it.Path == rel
		}
		if !found {
			c.fail("%s: container %s: %s %s: Secret %s's items put no file at %s", owner, ct.Name, what, file, sec.SecretName, rel)
		}
	}
	mode := int32(corev1.SecretVolumeSourceDefaultMode)
	if sec.DefaultMode != nil {
		mode = *sec.DefaultMode
	}
	if mode&0o004 == 0 && (psc == nil || psc.FSGroup == nil) {
		c.fail("%s: Secret volume %s has mode %#o and the pod no fsGroup: the gateway's user cannot read %s", owner, m.Name, mode, file)
	}
}
