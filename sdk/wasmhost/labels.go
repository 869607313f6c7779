package wasmhost

import (
	"context"
	"runtime/pprof"
	"sync/atomic"
)

// profileLabels: see SetProfileLabels.
var profileLabels atomic.Bool

// SetProfileLabels makes the callbacks of the plugins loaded afterwards
// run with their goroutine's profiler labels (runtime/pprof) set to
// plugin=<the plugin's name> and callback=<the export called>, so that a
// CPU profile splits the guests' time, and the host calls they make
// inside a callback, by plugin (the guest's own code has no Go symbols:
// without the labels its samples are one runtime._ExternalCode). Like the
// profiler itself it is process-wide; `tollgate serve -pprof` turns it on.
// Off (the default), a callback pays nothing for it; on, two stores of
// the goroutine's label pointer around each callback. A callback's labels
// are cleared, not restored, when it returns: the host sets no labels of
// its own.
func SetProfileLabels(on bool) { profileLabels.Store(on) }

// callbackLabels are a plugin's label sets by callback (the index of its
// export in callbackExports), nil when labels are off.
type callbackLabels []context.Context

func newCallbackLabels(plugin string) callbackLabels {
	if !profileLabels.Load() {
		return nil
	}
	l := make(callbackLabels, len(callbackExports))
	for i, name := range callbackExports {
		l[i] = pprof.WithLabels(context.Background(), pprof.Labels("plugin", plugin, "callback", name))
	}
	return l
}

// set labels the goroutine for the callback named name (one of
// callbackExports; another export is labelled as its plugin's first).
func (l callbackLabels) set(name string) {
	i := 0
	for j, n := range callbackExports {
		if n == name {
			i = j
			break
		}
	}
	pprof.SetGoroutineLabels(l[i])
}

// clear takes the labels off the goroutine.
func (l callbackLabels) clear() { pprof.SetGoroutineLabels(context.Background()) }
