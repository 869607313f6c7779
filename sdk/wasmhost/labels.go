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
// plugin=<the plugin's name> and callback=<the export called> (one of the
// request callbacks; another export gets the plugin alone), so that a
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
// export in callbackExports; the last, for any other export, names the
// plugin alone), nil when labels are off.
type callbackLabels []context.Context

func newCallbackLabels(plugin string) callbackLabels {
	if !profileLabels.Load() {
		return nil
	}
	l := make(callbackLabels, len(callbackExports)+1)
	for i, name := range callbackExports {
		l[i] = pprof.WithLabels(context.Background(), pprof.Labels("plugin", plugin, "callback", name))
	}
	l[len(callbackExports)] = pprof.WithLabels(context.Background(), pprof.Labels("plugin", plugin))
	return l
}

// set labels the goroutine for the export named name.
func (l callbackLabels) set(name string) {
	i := callbackIndex(name)
	if i < 0 {
		i = len(callbackExports)
	}
	pprof.SetGoroutineLabels(l[i])
}

// clear takes the labels off the goroutine.
func (l callbackLabels) clear() { pprof.SetGoroutineLabels(context.Background()) }
