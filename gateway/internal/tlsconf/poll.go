package tlsconf

import (
	"os"
	"sync"
	"time"
)

// poller notices that a set of files changed, by their stat, and runs a
// reload on an interval until closed.
type poller struct {
	names []string
	sig   []fileStamp // the files as last loaded (or last failed); reload goroutine only
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	every time.Duration
}

// newPoller watches the named files ("" names are left out) and takes
// their stamps now, before the caller's first load: a change made during
// that load is seen by the next check.
func newPoller(names ...string) *poller {
	p := &poller{stop: make(chan struct{}), done: make(chan struct{})}
	for _, n := range names {
		if n != "" {
			p.names = append(p.names, n)
		}
	}
	p.sig = p.stamp()
	return p
}

// changed reports whether the files changed since the last call (or
// newPoller), and remembers their new stamps either way.
func (p *poller) changed() bool {
	now := p.stamp()
	if sameStamps(now, p.sig) {
		return false
	}
	p.sig = now
	return true
}

// watch runs reload every interval (0: DefaultReloadInterval) until close.
func (p *poller) watch(every time.Duration, reload func()) {
	if every <= 0 {
		every = DefaultReloadInterval
	}
	p.every = every
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				reload()
			}
		}
	}()
}

// close stops watch and waits for it; safe to call more than once or
// without watch.
func (p *poller) close() {
	p.once.Do(func() {
		close(p.stop)
		if p.every > 0 {
			<-p.done
		}
	})
}

// fileStamp is what a stat says of a file: a rewrite, a rename over it or
// a secret volume's symlink swap changes it.
type fileStamp struct {
	mod  time.Time
	size int64
	err  bool
}

func (p *poller) stamp() []fileStamp {
	st := make([]fileStamp, 0, len(p.names))
	for _, n := range p.names {
		fi, err := os.Stat(n)
		if err != nil {
			st = append(st, fileStamp{err: true})
			continue
		}
		st = append(st, fileStamp{mod: fi.ModTime(), size: fi.Size()})
	}
	return st
}

func sameStamps(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size || a[i].err != b[i].err {
			return false
		}
	}
	return true
}
