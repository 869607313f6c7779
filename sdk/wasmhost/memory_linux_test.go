package wasmhost

import (
	"testing"
	"unsafe"
)

// A reserved linear memory grows in place: the data stays where it is (no
// copy during a callback), the new pages read zero, and growth past the
// maximum fails.
func TestReservedMemoryGrowsInPlace(t *testing.T) {
	const page = 64 << 10
	m := allocateLinear(page, 16*page)
	defer m.Free()
	if _, ok := m.(*reservedMemory); !ok {
		t.Fatalf("got %T, want a reservation", m)
	}
	b := m.Reallocate(page)
	if len(b) != page {
		t.Fatalf("len %d", len(b))
	}
	b[0], b[page-1] = 1, 2
	g := m.Reallocate(4 * page)
	if len(g) != 4*page || unsafe.SliceData(g) != unsafe.SliceData(b) {
		t.Fatalf("grown memory moved or has length %d", len(g))
	}
	if g[0] != 1 || g[page-1] != 2 {
		t.Fatal("grown memory lost its data")
	}
	for i := page; i < len(g); i += 4096 {
		if g[i] != 0 {
			t.Fatalf("byte %d of fresh memory is %d", i, g[i])
		}
	}
	if m.Reallocate(17*page) != nil {
		t.Fatal("grew past the maximum")
	}
}

// Plugins run on reserved memories, and a guest that grows its heap keeps
// working.
func TestPluginMemoryIsReserved(t *testing.T) {
	pl := pipeline(t, `{"request":"continue","phases":["request"]}`)
	r := request(`{}`)
	defer ReleaseRequest(r)
	for range 3000 {
		if err := pl.Request(r); err != nil {
			t.Fatal(err)
		}
	}
	p := pl.plugins[0]
	inst, err := p.get()
	if err != nil {
		t.Fatal(err)
	}
	defer p.put(inst)
	mem := inst.mod.Memory()
	before, _ := mem.Read(0, 1)
	if _, ok := mem.Grow(1); !ok {
		t.Fatal("memory.grow failed")
	}
	after, _ := mem.Read(0, 1)
	if unsafe.SliceData(before) != unsafe.SliceData(after) {
		t.Fatal("the plugin's memory moved when it grew: not a reservation")
	}
}
