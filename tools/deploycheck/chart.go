package deploycheck

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/strvals"
)

// KubeVersion is the Kubernetes version charts are rendered and linted for:
// the chart's kubeVersion floor is 1.27; this is a current release.
const KubeVersion = "v1.31.0"

// Release names a rendering, as `helm template NAME --namespace NS`.
type Release struct {
	Name      string
	Namespace string
	// Upgrade renders as `helm upgrade` would (.Release.IsUpgrade).
	Upgrade bool
}

// Rendered is one chart rendering: each template's output by file name
// (tollgate/templates/x.yaml), empty outputs and partials left out.
type Rendered struct {
	Files map[string]string
}

// Names returns the rendered files' names, sorted.
func (r *Rendered) Names() []string {
	names := make([]string, 0, len(r.Files))
	for n := range r.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Values parses `--set` style assignments (a.b=c,d[0]=e) into a values map,
// as `helm template --set` does.
func Values(sets ...string) (map[string]any, error) {
	vals := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	return vals, nil
}

// Render renders the chart in chartDir with values over its values.yaml,
// with Helm's engine, as `helm template` does (hooks included).
func Render(chartDir string, rel Release, values map[string]any) (*Rendered, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", chartDir, err)
	}
	kv, err := chartutil.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, kv.Version) {
		return nil, fmt.Errorf("chart requires kubeVersion %s, rendering for %s", ch.Metadata.KubeVersion, kv.Version)
	}
	opts := chartutil.ReleaseOptions{Name: rel.Name, Namespace: rel.Namespace, Revision: 1, IsInstall: !rel.Upgrade, IsUpgrade: rel.Upgrade}
	vals, err := chartutil.ToRenderValues(ch, values, opts, caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", ch.Name(), err)
	}
	out := &Rendered{Files: map[string]string{}}
	for name, text := range files {
		base := path.Base(name)
		if strings.HasPrefix(base, "_") || strings.HasSuffix(base, ".txt") || strings.TrimSpace(text) == "" {
			continue // partials, NOTES.txt, disabled templates
		}
		out.Files[name] = text
	}
	return out, nil
}

// Lint runs Helm's chart linter (`helm lint`) with values and returns its
// warnings and errors; information messages are dropped.
func Lint(chartDir, namespace string, values map[string]any) error {
	kv, err := chartutil.ParseKubeVersion(KubeVersion)
	if err != nil {
		return err
	}
	res := lint.AllWithKubeVersion(chartDir, values, namespace, kv)
	var errs []error
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			errs = append(errs, m)
		}
	}
	return errors.Join(errs...)
}
