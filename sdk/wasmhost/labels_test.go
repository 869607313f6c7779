package wasmhost

import (
	"bytes"
	"context"
	"runtime/pprof"
	"strings"
	"testing"
)

// labelServices records, from inside a callback's service call, the
// profiler labels of the goroutine that runs it.
type labelServices struct{ labels *string }

func (s labelServices) Call(*Request, string, []byte) ([]byte, error) {
	*s.labels = goroutineLabels("wasmhost.labelServices.Call")
	return []byte("ok"), nil
}

// goroutineLabels returns the "# labels:" line of the goroutine profile's
// entry whose stack holds frame ("" when it has none).
func goroutineLabels(frame string) string {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	for entry := range strings.SplitSeq(b.String(), "\n\n") {
		if !strings.Contains(entry, frame) {
			continue
		}
		for line := range strings.Lines(entry) {
			if l, ok := strings.CutPrefix(line, "# labels: "); ok {
				return strings.TrimSpace(l)
			}
		}
		return ""
	}
	return "(no goroutine with " + frame + ")"
}

// TestProfileLabels: with SetProfileLabels on, a callback (and the host
// calls it makes) runs labelled with its plugin and callback, and the
// labels are gone when it returns; a plugin loaded with it off runs
// unlabelled.
func TestProfileLabels(t *testing.T) {
	run := func(on bool) (during, after string) {
		SetProfileLabels(on)
		defer SetProfileLabels(false)
		pl, err := NewPipeline(context.Background(), testHost(t), []Spec{{Name: "labelled", Module: testPlugin(t), Config: []byte(`{"request":"call:svc"}`)}})
		if err != nil {
			t.Fatal(err)
		}
		defer pl.Close()
		r := request(`{}`)
		defer ReleaseRequest(r)
		r.Services = labelServices{&during}
		if err := pl.Request(r); err != nil {
			t.Fatal(err)
		}
		return during, goroutineLabels("wasmhost.TestProfileLabels")
	}
	during, after := run(true)
	if during != `{"callback":"on_request", "plugin":"labelled"}` {
		t.Errorf("labels inside the callback %q, want plugin and callback", during)
	}
	if after != "" {
		t.Errorf("labels after the callback %q, want none", after)
	}
	if during, _ := run(false); during != "" {
		t.Errorf("labels off: inside the callback %q, want none", during)
	}
}
