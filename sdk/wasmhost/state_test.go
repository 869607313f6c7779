package wasmhost

import "testing"

// TestStateAbsentBelowSetSlot: a request reused from the pool keeps its
// state buffers; a plugin whose slot lies below one that set its state
// in this request must still read none.
func TestStateAbsentBelowSetSlot(t *testing.T) {
	r := AcquireRequest()
	r.setState(0, []byte("a"))
	r.setState(2, []byte("c"))
	ReleaseRequest(r)
	for i := 0; i < 4; i++ { // the pool may hand back another request
		r = AcquireRequest()
		r.setState(3, []byte("d"))
		for slot := 0; slot < 3; slot++ {
			if st := r.state(slot); st != nil {
				t.Fatalf("slot %d reads state %q; nothing was set in this request", slot, st)
			}
		}
		if st := r.state(3); string(st) != "d" {
			t.Fatalf("slot 3 reads %q, want d", st)
		}
		if st := r.state(7); st != nil {
			t.Fatalf("slot 7 reads %q", st)
		}
		ReleaseRequest(r)
	}
}
