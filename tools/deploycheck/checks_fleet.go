package deploycheck

// The checks of what surrounds the gateway pods: Services, the HPA, the
// PodDisruptionBudget and the migration Job.

import (
	"slices"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

func (c *chartCheck) services() {
	svcs := ByKind(c.objs, "Service")
	if len(svcs) == 0 {
		c.fail("no Service rendered")
	}
	public := false
	for _, o := range svcs {
		s := o.Obj.(*corev1.Service)
		for _, msg := range validation.IsDNS1035Label(o.Name) {
			c.fail("%s: a Service name must be a DNS-1035 label: %s", o, msg)
		}
		if len(s.Spec.Selector) == 0 {
			c.fail("%s: no selector", o)
		}
		for k, v := range s.Spec.Selector {
			if c.gw.Pod.Labels[k] != v {
				c.fail("%s: selector %s=%s matches no gateway pod", o, k, v)
			}
		}
		for _, p := range s.Spec.Ports {
			named := p.TargetPort.Type == intstr.String
			if (named && !c.portRef(p.TargetPort, p.TargetPort.StrVal)) || (!named && p.TargetPort.IntVal != 0 && !c.anyPort(p.TargetPort.IntVal)) {
				c.fail("%s: port %q targets %s, which the gateway container does not expose", o, p.Name, p.TargetPort.String())
			}
			if p.TargetPort.String() == "http" && s.Spec.ClusterIP != corev1.ClusterIPNone {
				public = true
			}
		}
	}
	if !public {
		c.fail("no Service routes to the gateway's http port")
	}
}

func (c *chartCheck) anyPort(n int32) bool {
	for _, p := range c.gw.Container.Ports {
		if p.ContainerPort == n {
			return true
		}
	}
	return false
}

// floor is the fewest replicas the gateway runs: the HPA's minimum, or the
// workload's replicas.
func (c *chartCheck) floor() int32 {
	for _, o := range ByKind(c.objs, "HorizontalPodAutoscaler") {
		if h := o.Obj.(*autoscalingv2.HorizontalPodAutoscaler); h.Spec.MinReplicas != nil {
			return *h.Spec.MinReplicas
		}
		return 1
	}
	if c.gw.Replicas != nil {
		return *c.gw.Replicas
	}
	return 1
}

func (c *chartCheck) autoscaling() {
	hpas := ByKind(c.objs, "HorizontalPodAutoscaler")
	if len(hpas) > 1 {
		c.fail("%d HorizontalPodAutoscalers; want at most one", len(hpas))
	}
	for _, o := range hpas {
		h := o.Obj.(*autoscalingv2.HorizontalPodAutoscaler)
		ref := h.Spec.ScaleTargetRef
		if ref.APIVersion != "apps/v1" || ref.Kind != c.gw.Workload.Kind || ref.Name != c.gw.Workload.Name {
			c.fail("%s: scaleTargetRef %s %s/%s is not %s", o, ref.APIVersion, ref.Kind, ref.Name, c.gw.Workload)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			c.fail("%s: want 2 ≤ minReplicas ≤ maxReplicas (%d), got %v", o, h.Spec.MaxReplicas, h.Spec.MinReplicas)
		}
		if c.gw.Replicas != nil {
			c.fail("%s: %s sets replicas while an HPA scales it: every helm upgrade would reset the HPA's count", o, c.gw.Workload)
		}
		cpu := false
		for _, m := range h.Spec.Metrics {
			switch m.Type {
			case autoscalingv2.ResourceMetricSourceType:
				if m.Resource.Name == corev1.ResourceCPU && m.Resource.Target.Type == autoscalingv2.UtilizationMetricType &&
					m.Resource.Target.AverageUtilization != nil && *m.Resource.Target.AverageUtilization > 0 && *m.Resource.Target.AverageUtilization <= 100 {
					cpu = true
				}
			case autoscalingv2.PodsMetricSourceType:
				if m.Pods.Metric.Name != InflightMetric || m.Pods.Target.Type != autoscalingv2.AverageValueMetricType ||
					m.Pods.Target.AverageValue == nil || m.Pods.Target.AverageValue.Sign() <= 0 {
					c.fail("%s: Pods metric %q target %+v: want %s with a positive AverageValue", o, m.Pods.Metric.Name, m.Pods.Target, InflightMetric)
				}
			default:
				c.fail("%s: metric type %s: the chart scales on %s and CPU only", o, m.Type, InflightMetric)
			}
		}
		if !cpu {
			c.fail("%s: no CPU utilization metric (the fallback when the custom metric is unavailable)", o)
		}
	}
}

func (c *chartCheck) disruptionBudget() {
	for _, o := range ByKind(c.objs, "PodDisruptionBudget") {
		p := o.Obj.(*policyv1.PodDisruptionBudget)
		if p.Spec.Selector == nil || len(p.Spec.Selector.MatchLabels) == 0 {
			c.fail("%s: no selector", o)
		} else {
			for k, v := range p.Spec.Selector.MatchLabels {
				if c.gw.Pod.Labels[k] != v {
					c.fail("%s: selector %s=%s matches no gateway pod", o, k, v)
				}
			}
		}
		switch {
		case p.Spec.MinAvailable != nil && p.Spec.MinAvailable.Type == intstr.Int:
			if floor := c.floor(); p.Spec.MinAvailable.IntVal >= floor || p.Spec.MinAvailable.IntVal < 1 {
				c.fail("%s: minAvailable %d with %d replicas at least: want 1 ≤ minAvailable < replicas, or no node could be drained", o, p.Spec.MinAvailable.IntVal, floor)
			}
		case p.Spec.MaxUnavailable != nil:
		default:
			c.fail("%s: want minAvailable as a number of pods (or maxUnavailable)", o)
		}
	}
}

func (c *chartCheck) migration() {
	jobs := ByKind(c.objs, "Job")
	for _, o := range jobs {
		j := o.Obj.(*batchv1.Job)
		hooks := strings.Split(j.Annotations["helm.sh/hook"], ",")
		if !slices.Contains(hooks, "pre-install") || !slices.Contains(hooks, "pre-upgrade") {
			c.fail("%s: helm.sh/hook %q: the migration must run before install and upgrade", o, j.Annotations["helm.sh/hook"])
		}
		spec := j.Spec.Template.Spec
		if spec.RestartPolicy != corev1.RestartPolicyNever && spec.RestartPolicy != corev1.RestartPolicyOnFailure {
			c.fail("%s: restartPolicy %q is not allowed for a Job", o, spec.RestartPolicy)
		}
		if len(spec.Containers) != 1 {
			c.fail("%s: want one container", o)
			continue
		}
		ct := spec.Containers[0]
		if !slices.Equal(ct.Args, []string{"migrate", "up"}) {
			c.fail("%s: args %q, want [migrate up]", o, ct.Args)
		}
		if ct.Image != c.gw.Container.Image {
			c.fail("%s: image %s is not the gateway's %s: the schema would not match the release", o, ct.Image, c.gw.Container.Image)
		}
		dsn := "TOLLGATE_DATABASE_URL"
		if c.gw.Policy != nil {
			dsn = c.gw.Policy.Store.Postgres.DSNEnv
		}
		found := false
		for _, e := range ct.Env {
			if e.Name == dsn && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != "" {
				found = true
			}
		}
		if !found {
			c.fail("%s: env %s does not come from a Secret", o, dsn)
		}
		if spec.ServiceAccountName != "" && spec.ServiceAccountName != "default" {
			for _, sa := range ByKind(c.objs, "ServiceAccount") {
				if sa.Name == spec.ServiceAccountName && !strings.Contains(sa.Meta.Annotations["helm.sh/hook"], "pre-install") {
					c.fail("%s: uses ServiceAccount %s, which the release creates only after pre-install hooks", o, sa.Name)
				}
			}
		}
	}
}
