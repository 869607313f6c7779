package conformance

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// recorder watches a plugin from inside the runtime without changing it:
// a wazero function listener, attached through the context of the load,
// sees the host's `tollgate` functions as the runtime defines them (the
// import table a module is checked against) and, after each guest
// callback, the size of the instance's linear memory.
//
// Listeners are compiled into the module's code, and wazero keys compiled
// code (and its cache entries) on whether a function has a listener, so
// a module loaded with a recorder never shares code with the gateway's.
type recorder struct {
	mu   sync.Mutex
	host map[string]api.FunctionDefinition // the tollgate module's functions by name

	// memory is the linear memory's size after the last callback, and
	// peak the largest seen, in bytes.
	memory, peak atomic.Uint64
}

// with returns ctx carrying the recorder as the function listener factory.
func (rec *recorder) with(ctx context.Context) context.Context {
	return experimental.WithFunctionListenerFactory(ctx, rec)
}

// NewFunctionListener implements experimental.FunctionListenerFactory.
func (rec *recorder) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	if def.ModuleName() == "tollgate" && def.GoFunction() != nil {
		rec.mu.Lock()
		if rec.host == nil {
			rec.host = make(map[string]api.FunctionDefinition)
		}
		rec.host[def.Name()] = def
		rec.mu.Unlock()
		return nil
	}
	for _, name := range def.ExportNames() {
		switch name {
		case "_initialize", "on_configure", "on_request", "on_response_headers", "on_chunk", "on_end":
			return callbackListener{rec}
		}
	}
	return nil
}

// hostFunctions returns the tollgate functions seen so far.
func (rec *recorder) hostFunctions() map[string]api.FunctionDefinition {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.host
}

type callbackListener struct{ rec *recorder }

func (callbackListener) Before(context.Context, api.Module, api.FunctionDefinition, []uint64, experimental.StackIterator) {
}

func (l callbackListener) After(_ context.Context, mod api.Module, _ api.FunctionDefinition, _ []uint64) {
	mem := mod.Memory()
	if mem == nil {
		return
	}
	size := uint64(mem.Size())
	l.rec.memory.Store(size)
	for {
		p := l.rec.peak.Load()
		if size <= p || l.rec.peak.CompareAndSwap(p, size) {
			return
		}
	}
}

func (callbackListener) Abort(context.Context, api.Module, api.FunctionDefinition, error) {}
