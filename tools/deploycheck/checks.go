package deploycheck

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// InflightMetric is the custom Pods metric the HPA may scale on.
const InflightMetric = "tollgate_inflight_requests"

// Gateway is the chart's gateway workload as CheckChart found it.
type Gateway struct {
	Workload  *Object // the Deployment or StatefulSet
	Pod       *corev1.PodTemplateSpec
	Container *corev1.Container
	Claims    []corev1.PersistentVolumeClaim // StatefulSet volumeClaimTemplates
	Replicas  *int32

	PolicyPath    string // -policy
	PolicyText    string // the ConfigMap's file at PolicyPath
	Policy        *Policy
	ShutdownDelay time.Duration // -shutdown-delay
	DrainTimeout  time.Duration // the policy's server.drain_timeout
}

// chartCheck collects problems; each check adds what it finds and goes on.
type chartCheck struct {
	objs []*Object
	gw   Gateway
	errs []error
}

func (c *chartCheck) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// CheckChart checks that the decoded manifests deploy the gateway as
// docs/SCALING.md and deploy/README.md describe. It returns what it found
// of the gateway (for further checks, e.g. validating its policy) and every
// problem.
func CheckChart(objs []*Object) (*Gateway, error) {
	c := &chartCheck{objs: objs}
	if !c.workload() {
		return nil, errors.Join(c.errs...)
	}
	if c.policy() {
		c.ports()
		c.env()
		c.writablePaths()
		c.pluginCache()
		c.shutdown()
		c.tls()
	}
	c.probes()
	c.resources()
	c.security()
	c.services()
	c.autoscaling()
	c.disruptionBudget()
	c.migration()
	return &c.gw, errors.Join(c.errs...)
}

func (c *chartCheck) workload() bool {
	var ws []*Object
	for _, o := range c.objs {
		switch w := o.Obj.(type) {
		case *appsv1.Deployment:
			ws = append(ws, o)
			c.gw.Pod, c.gw.Replicas = &w.Spec.Template, w.Spec.Replicas
			c.checkSelector(o, w.Spec.Selector.MatchLabels, w.Spec.Template.Labels)
			if s := w.Spec.Strategy.RollingUpdate; s != nil && s.MaxUnavailable != nil && s.MaxUnavailable.IntValue() != 0 {
				c.fail("%s: rollingUpdate.maxUnavailable %s: a rolling update would take a serving pod down before its replacement is ready", o, s.MaxUnavailable)
			}
		case *appsv1.StatefulSet:
			ws = append(ws, o)
			c.gw.Pod, c.gw.Replicas, c.gw.Claims = &w.Spec.Template, w.Spec.Replicas, w.Spec.VolumeClaimTemplates
			c.checkSelector(o, w.Spec.Selector.MatchLabels, w.Spec.Template.Labels)
			c.checkGoverningService(o, w.Spec.ServiceName)
		}
	}
	if len(ws) != 1 {
		c.fail("want exactly one gateway Deployment or StatefulSet, found %d", len(ws))
		return false
	}
	c.gw.Workload = ws[0]
	for i := range c.gw.Pod.Spec.Containers {
		if c.gw.Pod.Spec.Containers[i].Name == "tollgate" {
			c.gw.Container = &c.gw.Pod.Spec.Containers[i]
		}
	}
	if c.gw.Container == nil {
		c.fail("%s: no container named tollgate", c.gw.Workload)
		return false
	}
	args := c.gw.Container.Args
	if len(args) == 0 || args[0] != "serve" {
		c.fail("%s: args %q: want `serve ...` (the image's ENTRYPOINT is tollgate)", c.gw.Workload, args)
	}
	c.gw.PolicyPath = flagValue(args, "-policy")
	if c.gw.PolicyPath == "" {
		c.fail("%s: no -policy flag: the gateway would run its embedded default policy", c.gw.Workload)
	}
	if d := flagValue(args, "-shutdown-delay"); d != "" {
		var err error
		if c.gw.ShutdownDelay, err = time.ParseDuration(d); err != nil {
			c.fail("%s: -shutdown-delay %q: %v", c.gw.Workload, d, err)
		}
	}
	return true
}

// flagValue returns the value of -name in args (`-name v` or `-name=v`).
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func (c *chartCheck) checkSelector(o *Object, selector, labels map[string]string) {
	if len(selector) == 0 {
		c.fail("%s: empty selector", o)
	}
	for k, v := range selector {
		if labels[k] != v {
			c.fail("%s: selector %s=%s does not match the pod template's labels %v", o, k, v, labels)
		}
	}
	for _, err := range validateLabels("pod template labels", labels) {
		c.fail("%s: %v", o, err)
	}
}

func (c *chartCheck) checkGoverningService(o *Object, name string) {
	for _, s := range ByKind(c.objs, "Service") {
		if s.Name == name {
			if svc := s.Obj.(*corev1.Service); svc.Spec.ClusterIP != corev1.ClusterIPNone {
				c.fail("%s: serviceName %q is not a headless Service", o, name)
			}
			return
		}
	}
	c.fail("%s: serviceName %q: no such Service rendered", o, name)
}

// policy finds the ConfigMap mounted where -policy points and parses it.
func (c *chartCheck) policy() bool {
	if c.gw.PolicyPath == "" {
		return false
	}
	dir, file := path.Split(c.gw.PolicyPath)
	dir = strings.TrimSuffix(dir, "/")
	var cmName string
	for _, m := range c.gw.Container.VolumeMounts {
		if m.MountPath != dir || m.SubPath != "" {
			continue
		}
		for _, v := range c.gw.Pod.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cmName = v.ConfigMap.Name
			}
		}
	}
	if cmName == "" {
		c.fail("%s: -policy %s is not in a ConfigMap volume mounted (whole, not subPath: updates must reach the pod) at %s", c.gw.Workload, c.gw.PolicyPath, dir)
		return false
	}
	for _, o := range ByKind(c.objs, "ConfigMap") {
		if o.Name != cmName {
			continue
		}
		text, ok := o.Obj.(*corev1.ConfigMap).Data[file]
		if !ok {
			c.fail("%s has no key %q (the -policy file)", o, file)
			return false
		}
		p, err := ParsePolicy(text)
		if err != nil {
			c.fail("%s: %v", o, err)
			return false
		}
		c.gw.PolicyText, c.gw.Policy = text, p
		if c.gw.DrainTimeout, err = time.ParseDuration(ExpandDefaults(p.Server.DrainTimeout)); err != nil {
			c.fail("%s: server.drain_timeout %q: %v (set it explicitly; the gateway's default is 30s)", o, p.Server.DrainTimeout, err)
		}
		if p.Store.Kind != "postgres" {
			c.fail("%s: store.kind %q: replicas share tenants through Postgres", o, p.Store.Kind)
		}
		if p.Store.Postgres.MaxConns <= 0 {
			c.fail("%s: store.postgres.max_conns unset: pgx would open max(4, node CPUs) connections per pod", o)
		}
		if len(p.Redis.Addrs) == 0 {
			c.fail("%s: no redis.addrs: each replica would count rate limits and budgets alone", o)
		}
		return true
	}
	c.fail("%s: ConfigMap %q is not rendered", c.gw.Workload, cmName)
	return false
}

func (c *chartCheck) containerPort(name string) (int32, bool) {
	for _, p := range c.gw.Container.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

func (c *chartCheck) ports() {
	for _, p := range c.gw.Container.Ports {
		for _, msg := range validation.IsValidPortName(p.Name) {
			c.fail("%s: port name %q: %s", c.gw.Workload, p.Name, msg)
		}
	}
	check := func(portName, addr, field string) {
		want, err := ListenPort(addr)
		if err != nil {
			c.fail("policy %s %q: %v", field, addr, err)
			return
		}
		if got, ok := c.containerPort(portName); !ok || int(got) != want {
			c.fail("%s: container port %q is %d, the policy's %s listens on %d", c.gw.Workload, portName, got, field, want)
		}
	}
	check("http", c.gw.Policy.Server.Listen, "server.listen")
	if c.gw.Policy.Admin.Listen != "" {
		check("admin", c.gw.Policy.Admin.Listen, "admin.listen")
	}
	if c.gw.Policy.Metrics.Listen != "" {
		check("metrics", c.gw.Policy.Metrics.Listen, "metrics.listen")
	}
	if c.gw.Policy.Metrics.Public {
		c.fail("policy metrics.public: /metrics (spend by tenant) on the public Service")
	}
}

// env checks that every secret the policy reads comes from a Secret.
func (c *chartCheck) env() {
	env := map[string]corev1.EnvVar{}
	for _, e := range c.gw.Container.Env {
		if _, dup := env[e.Name]; dup {
			c.fail("%s: env %s set twice", c.gw.Workload, e.Name)
		}
		env[e.Name] = e
		for _, msg := range validation.IsEnvVarName(e.Name) {
			c.fail("%s: env name %q: %s", c.gw.Workload, e.Name, msg)
		}
	}
	p := c.gw.Policy
	secret := func(name, why string, required bool) {
		e, ok := env[name]
		switch {
		case !ok && required:
			c.fail("%s: env %s (%s) is not set", c.gw.Workload, name, why)
		case !ok:
		case e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil:
			c.fail("%s: env %s (%s) must come from a Secret (valueFrom.secretKeyRef), not a literal", c.gw.Workload, name, why)
		case e.ValueFrom.SecretKeyRef.Name == "" || e.ValueFrom.SecretKeyRef.Key == "":
			c.fail("%s: env %s: secretKeyRef needs a name and a key", c.gw.Workload, name)
		}
	}
	secret(p.Store.Postgres.DSNEnv, "store.postgres.dsn_env", true)
	if p.Admin.Listen != "" {
		secret(p.Admin.TokenEnv, "admin.token_env", true)
	}
	secret(p.Redis.PasswordEnv, "redis.password_env", false)
	if p.Metrics.TokenEnv != "" {
		secret(p.Metrics.TokenEnv, "metrics.token_env", true)
	}
	for _, u := range p.Upstreams {
		if u.APIKeyEnv != "" {
			secret(u.APIKeyEnv, "upstream "+u.Name+" api_key_env", true)
		}
	}
	if v, ok := env["GOMEMLIMIT"]; ok {
		lim := c.gw.Container.Resources.Limits.Memory()
		if q, err := resource.ParseQuantity(strings.TrimSuffix(v.Value, "B")); err != nil {
			c.fail("%s: GOMEMLIMIT %q: %v", c.gw.Workload, v.Value, err)
		} else if !lim.IsZero() && q.Cmp(*lim) >= 0 {
			c.fail("%s: GOMEMLIMIT %s is not below the memory limit %s", c.gw.Workload, v.Value, lim)
		}
	}
}

// writablePaths: with a read-only root file system, the spool, the plugin
// cache and /tmp must be on volumes, and the spool on the right kind.
func (c *chartCheck) writablePaths() {
	p := c.gw.Policy
	mountOf := func(dir string) *corev1.VolumeMount {
		var best *corev1.VolumeMount
		for i, m := range c.gw.Container.VolumeMounts {
			if (dir == m.MountPath || strings.HasPrefix(dir, strings.TrimSuffix(m.MountPath, "/")+"/")) &&
				(best == nil || len(m.MountPath) > len(best.MountPath)) {
				best = &c.gw.Container.VolumeMounts[i]
			}
		}
		return best
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range c.gw.Pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	claims := map[string]bool{}
	for _, pvc := range c.gw.Claims {
		claims[pvc.Name] = true
	}
	for _, m := range c.gw.Container.VolumeMounts {
		if _, ok := volumes[m.Name]; !ok && !claims[m.Name] {
			c.fail("%s: volumeMount %q names no volume or volumeClaimTemplate", c.gw.Workload, m.Name)
		}
	}
	cacheDir := ExpandDefaults(p.PluginRuntime.CacheDir)
	if cacheDir == "" {
		c.fail("%s: plugin_runtime.cache_dir unset: compiled plugins would go to $XDG_CACHE_HOME or $HOME/.cache", c.gw.Workload)
	}
	spool := ExpandDefaults(p.CallLog.SpoolDir)
	for _, dir := range []string{spool, cacheDir, "/tmp"} {
		if dir == "" {
			continue
		}
		m := mountOf(dir)
		if m == nil || m.ReadOnly {
			c.fail("%s: %s is not on a writable volume (the root file system is read-only)", c.gw.Workload, dir)
		}
	}
	m := mountOf(spool)
	if spool == "" || m == nil {
		c.fail("%s: call_log.spool_dir %q is not on a volume", c.gw.Workload, spool)
		return
	}
	switch c.gw.Workload.Kind {
	case "StatefulSet":
		if !claims[m.Name] {
			c.fail("%s: the spool %s is on volume %q, not a volumeClaimTemplate: it would not survive the pod", c.gw.Workload, spool, m.Name)
		}
	case "Deployment":
		if v := volumes[m.Name]; v.EmptyDir == nil {
			c.fail("%s: the spool is on volume %q, which is not an emptyDir: a shared volume would put several gateways on one spool (flock)", c.gw.Workload, m.Name)
		}
	}
}

func (c *chartCheck) shutdown() {
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if g := c.gw.Pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	need := c.gw.ShutdownDelay + c.gw.DrainTimeout
	if time.Duration(grace)*time.Second <= need {
		c.fail("%s: terminationGracePeriodSeconds %d is not longer than -shutdown-delay %v + drain_timeout %v: the kubelet would SIGKILL open streams",
			c.gw.Workload, grace, c.gw.ShutdownDelay, c.gw.DrainTimeout)
	}
	// The drain must outlast the longest stream the policy allows, or a
	// rolling deploy cuts it (deploy/README.md, Drain).
	for _, u := range c.gw.Policy.Upstreams {
		total := 10 * time.Minute // the gateway's default timeouts.total
		if u.Timeouts.Total != "" {
			d, err := time.ParseDuration(u.Timeouts.Total)
			if err != nil {
				c.fail("policy upstream %s: timeouts.total %q: %v", u.Name, u.Timeouts.Total, err)
				continue
			}
			total = d
		}
		if c.gw.DrainTimeout < total {
			c.fail("%s: drain_timeout %v is shorter than upstream %s's timeouts.total %v: a rolling deploy would cut its longest streams",
				c.gw.Workload, c.gw.DrainTimeout, u.Name, total)
		}
	}
}

func (c *chartCheck) probes() {
	ct := c.gw.Container
	httpProbe := func(name string, p *corev1.Probe, wantPath string) bool {
		if p == nil {
			c.fail("%s: no %s probe", c.gw.Workload, name)
			return false
		}
		if p.HTTPGet == nil || p.HTTPGet.Path != wantPath {
			c.fail("%s: %s probe must be GET %s, got %+v", c.gw.Workload, name, wantPath, p.ProbeHandler)
			return false
		}
		if !c.portRef(p.HTTPGet.Port, "http") {
			c.fail("%s: %s probe port %s is not the container's http port", c.gw.Workload, name, p.HTTPGet.Port.String())
		}
		return true
	}
	if httpProbe("readiness", ct.ReadinessProbe, "/readyz") {
		r := ct.ReadinessProbe
		noticed := time.Duration(max(r.PeriodSeconds, 1)*max(r.FailureThreshold, 1)) * time.Second
		if c.gw.ShutdownDelay < noticed {
			c.fail("%s: -shutdown-delay %v is shorter than the readiness probe takes to notice a drain (%d s × %d): the listener would close while the pod still gets traffic",
				c.gw.Workload, c.gw.ShutdownDelay, r.PeriodSeconds, r.FailureThreshold)
		}
	}
	if httpProbe("liveness", ct.LivenessProbe, "/healthz") {
		l := ct.LivenessProbe
		if l.TimeoutSeconds < 3 || l.PeriodSeconds*l.FailureThreshold < 30 {
			c.fail("%s: liveness probe (timeout %d s, %d × %d s) is not generous: a CPU-saturated pod would be restarted and its streams cut",
				c.gw.Workload, l.TimeoutSeconds, l.FailureThreshold, l.PeriodSeconds)
		}
	}
	if ct.StartupProbe != nil {
		httpProbe("startup", ct.StartupProbe, "/healthz")
	}
}

// portRef reports whether a probe or Service port refers to the named
// container port (by name or number).
func (c *chartCheck) portRef(p intstr.IntOrString, name string) bool {
	n, ok := c.containerPort(name)
	if !ok {
		return false
	}
	if p.Type == intstr.String {
		return p.StrVal == name
	}
	return p.IntVal == n
}

func (c *chartCheck) resources() {
	r := c.gw.Container.Resources
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := r.Requests[name]
		lim, hasLim := r.Limits[name]
		if !hasReq || req.IsZero() {
			c.fail("%s: no %s request", c.gw.Workload, name)
		}
		if name == corev1.ResourceMemory && !hasLim {
			c.fail("%s: no memory limit", c.gw.Workload)
		}
		if hasReq && hasLim && req.Cmp(lim) > 0 {
			c.fail("%s: %s request %s exceeds its limit %s", c.gw.Workload, name, req.String(), lim.String())
		}
	}
}

func (c *chartCheck) security() {
	ps, cs := c.gw.Pod.Spec.SecurityContext, c.gw.Container.SecurityContext
	nonRoot := (ps != nil && ps.RunAsNonRoot != nil && *ps.RunAsNonRoot) || (cs != nil && cs.RunAsNonRoot != nil && *cs.RunAsNonRoot)
	if !nonRoot {
		c.fail("%s: runAsNonRoot is not set", c.gw.Workload)
	}
	if cs == nil || cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem {
		c.fail("%s: readOnlyRootFilesystem is not set", c.gw.Workload)
	}
	if cs == nil || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation {
		c.fail("%s: allowPrivilegeEscalation is not false", c.gw.Workload)
	}
	if a := c.gw.Pod.Spec.AutomountServiceAccountToken; a == nil || *a {
		c.fail("%s: the gateway does not use the Kubernetes API: set automountServiceAccountToken: false", c.gw.Workload)
	}
}
