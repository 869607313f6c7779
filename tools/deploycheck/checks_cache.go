package deploycheck

import (
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ImageCacheDir is where the image ships compiled plugins
// (deploy/docker/build.sh, OUT/state/cache/wazero).
const ImageCacheDir = "/var/cache/tollgate/wazero"

// pluginCache checks the init container that fills the gateway's
// compilation cache before it starts (`tollgate plugin warm`): same image,
// same policy file, seeded from the cache the image ships (not hidden by a
// volume), writing into the volume and directory the gateway's
// plugin_runtime.cache_dir resolves to, with the gateway's environment (the
// policy must validate).
func (c *chartCheck) pluginCache() {
	var warm *corev1.Container
	for i, ic := range c.gw.Pod.Spec.InitContainers {
		if len(ic.Args) >= 2 && ic.Args[0] == "plugin" && ic.Args[1] == "warm" {
			warm = &c.gw.Pod.Spec.InitContainers[i]
		}
	}
	if warm == nil {
		c.fail("%s: no init container runs `tollgate plugin warm`: the cache volume starts empty and every new pod compiles its plugins at start", c.gw.Workload)
		return
	}
	at := c.gw.Workload.String() + " init container " + warm.Name
	if warm.Image != c.gw.Container.Image {
		c.fail("%s: image %s, the gateway's is %s: the cache is valid only for the binary's wazero version", at, warm.Image, c.gw.Container.Image)
	}
	if p := flagValue(warm.Args, "-policy"); p != c.gw.PolicyPath {
		c.fail("%s: -policy %q, the gateway serves %q", at, p, c.gw.PolicyPath)
	} else if v, _ := volumeAt(warm.VolumeMounts, path.Dir(p)); v != volumeName(c.gw.Container.VolumeMounts, path.Dir(p)) {
		c.fail("%s: %s is not the gateway's policy volume", at, path.Dir(p))
	}
	if seed := flagValue(warm.Args, "-seed"); seed != ImageCacheDir {
		c.fail("%s: -seed %q, want the image's cache %s", at, seed, ImageCacheDir)
	} else if v, _ := volumeAt(warm.VolumeMounts, seed); v != "" {
		c.fail("%s: -seed %s is under volume %q, which hides the cache the image ships", at, seed, v)
	}
	dst := flagValue(warm.Args, "-cache-dir")
	wv, wrel := volumeAt(warm.VolumeMounts, dst)
	gv, grel := volumeAt(c.gw.Container.VolumeMounts, ExpandDefaults(c.gw.Policy.PluginRuntime.CacheDir))
	if wv == "" || wv != gv || wrel != grel {
		c.fail("%s: -cache-dir %q is volume %q at %q, but the gateway's plugin_runtime.cache_dir is volume %q at %q", at, dst, wv, wrel, gv, grel)
	}
	names := func(env []corev1.EnvVar) []string {
		var ns []string
		for _, e := range env {
			ns = append(ns, e.Name)
		}
		slices.Sort(ns)
		return ns
	}
	if w, g := names(warm.Env), names(c.gw.Container.Env); !slices.Equal(w, g) {
		c.fail("%s: env %v, the gateway's %v: the policy reads the same variables in both", at, w, g)
	}
}

// volumeAt returns the volume mounted at or above dir (the deepest such
// mount) and dir's path inside it; "" when none.
func volumeAt(mounts []corev1.VolumeMount, dir string) (volume, rel string) {
	best := -1
	for i, m := range mounts {
		mp := strings.TrimSuffix(m.MountPath, "/")
		if (dir == mp || strings.HasPrefix(dir, mp+"/")) && (best < 0 || len(mp) > len(mounts[best].MountPath)) {
			best, rel = i, strings.TrimPrefix(strings.TrimPrefix(dir, mp), "/")
		}
	}
	if best < 0 {
		return "", ""
	}
	return mounts[best].Name, path.Join(mounts[best].SubPath, rel)
}

func volumeName(mounts []corev1.VolumeMount, dir string) string {
	v, _ := volumeAt(mounts, dir)
	return v
}
