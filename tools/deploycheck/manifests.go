package deploycheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsyaml "sigs.k8s.io/yaml"
)

// Object is one decoded manifest.
type Object struct {
	Source string // template file and document index, for messages
	Kind   string
	Name   string
	Meta   *metav1.ObjectMeta
	Obj    any // *appsv1.Deployment, *corev1.Service, ...
}

func (o *Object) String() string { return fmt.Sprintf("%s %q (%s)", o.Kind, o.Name, o.Source) }

// kinds maps apiVersion/kind to a constructor of its typed struct: the kinds
// the chart may render. Any other kind is an error, so nothing is rendered
// that the checker has not decoded.
var kinds = map[string]func() (any, *metav1.ObjectMeta){
	"apps/v1/Deployment": func() (any, *metav1.ObjectMeta) {
		o := &appsv1.Deployment{}
		return o, &o.ObjectMeta
	},
	"apps/v1/StatefulSet": func() (any, *metav1.ObjectMeta) {
		o := &appsv1.StatefulSet{}
		return o, &o.ObjectMeta
	},
	"v1/Service": func() (any, *metav1.ObjectMeta) {
		o := &corev1.Service{}
		return o, &o.ObjectMeta
	},
	"v1/ConfigMap": func() (any, *metav1.ObjectMeta) {
		o := &corev1.ConfigMap{}
		return o, &o.ObjectMeta
	},
	"v1/ServiceAccount": func() (any, *metav1.ObjectMeta) {
		o := &corev1.ServiceAccount{}
		return o, &o.ObjectMeta
	},
	"batch/v1/Job": func() (any, *metav1.ObjectMeta) {
		o := &batchv1.Job{}
		return o, &o.ObjectMeta
	},
	"autoscaling/v2/HorizontalPodAutoscaler": func() (any, *metav1.ObjectMeta) {
		o := &autoscalingv2.HorizontalPodAutoscaler{}
		return o, &o.ObjectMeta
	},
	"policy/v1/PodDisruptionBudget": func() (any, *metav1.ObjectMeta) {
		o := &policyv1.PodDisruptionBudget{}
		return o, &o.ObjectMeta
	},
}

// Decode splits each rendered file into YAML documents and decodes each
// strictly into its typed struct. It reports every problem it finds.
func Decode(r *Rendered) ([]*Object, error) {
	var (
		objs []*Object
		errs []error
		seen = map[string]string{}
	)
	for _, name := range r.Names() {
		docs, err := splitDocuments(r.Files[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		for i, doc := range docs {
			src := fmt.Sprintf("%s#%d", name, i)
			o, err := decodeOne(src, doc)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			id := o.Kind + "/" + o.Name
			if prev, dup := seen[id]; dup {
				errs = append(errs, fmt.Errorf("%s: %s is also rendered by %s", src, id, prev))
			}
			seen[id] = src
			objs = append(objs, o)
		}
	}
	return objs, errors.Join(errs...)
}

// splitDocuments returns the non-empty YAML documents of a stream.
func splitDocuments(text string) ([][]byte, error) {
	dec := yaml.NewDecoder(strings.NewReader(text))
	var docs [][]byte
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("YAML: %w", err)
		}
		if len(n.Content) == 0 || (n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null") {
			continue // comments only
		}
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		if err := enc.Encode(&n); err != nil {
			return nil, err
		}
		enc.Close()
		docs = append(docs, buf.Bytes())
	}
}

func decodeOne(src string, doc []byte) (*Object, error) {
	var tm metav1.TypeMeta
	if err := sigsyaml.Unmarshal(doc, &tm); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return nil, fmt.Errorf("%s: apiVersion %q kind %q is not a kind this checker validates", src, tm.APIVersion, tm.Kind)
	}
	obj, meta := newObj()
	// UnmarshalStrict: YAML → JSON, then encoding/json with unknown fields
	// and duplicate keys rejected, into the API's own types.
	if err := sigsyaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", src, tm.Kind, err)
	}
	o := &Object{Source: src, Kind: tm.Kind, Name: meta.Name, Meta: meta, Obj: obj}
	if err := validateMeta(meta); err != nil {
		return nil, fmt.Errorf("%s: %w", o, err)
	}
	return o, nil
}

// validateMeta checks what the API server checks of every object's
// metadata: a DNS-1123 name, qualified label keys and valid label values.
func validateMeta(m *metav1.ObjectMeta) error {
	var errs []error
	if m.Name == "" {
		errs = append(errs, errors.New("metadata.name is empty"))
	}
	for _, msg := range validation.IsDNS1123Subdomain(m.Name) {
		errs = append(errs, fmt.Errorf("metadata.name %q: %s", m.Name, msg))
	}
	errs = append(errs, validateLabels("metadata.labels", m.Labels)...)
	for k := range m.Annotations {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("metadata.annotations key %q: %s", k, msg))
		}
	}
	return errors.Join(errs...)
}

func validateLabels(at string, labels map[string]string) []error {
	var errs []error
	for k, v := range labels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("%s key %q: %s", at, k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("%s[%s] %q: %s", at, k, v, msg))
		}
	}
	return errs
}

// ByKind returns the objects of one kind.
func ByKind(objs []*Object, kind string) []*Object {
	var out []*Object
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}
