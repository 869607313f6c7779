package meterstore

// SetBeforeSend makes every deferred end's sender run f first (tests hold
// senders back to see the ends carried).
func (s *Store) SetBeforeSend(f func()) { s.ends.beforeSend = f }

// SetBeforeAck makes every deferred end's sender run f once answered,
// before its end leaves pending.
func (s *Store) SetBeforeAck(f func()) { s.ends.beforeAck = f }

// Pending is how many ends are pending, all tenants.
func (s *Store) Pending() int64 { return s.ends.n.Load() }

// LastSeq is the Seq of the Store's latest admission: End given it defers
// as if the request were alone on the Store.
func (s *Store) LastSeq() uint64 { return s.admits.Load() }

// SetBeforeFirstCall makes the first admission and the first end of
// every group run f before its call (tests hold it back to make the next
// ones wait).
func (s *Store) SetBeforeFirstCall(f func()) {
	s.admitGroups.beforeFirst, s.endGroups.beforeFirst = f, f
}

// SetShared turns the shared calls on (the default) or off.
func (s *Store) SetShared(on bool) { s.admitGroups.off, s.endGroups.off = !on, !on }

// Waiting is how many admissions and ends wait for their group's call.
func (s *Store) Waiting() int {
	n := 0
	for _, g := range []*groups{&s.admitGroups, &s.endGroups} {
		g.mu.Lock()
		for _, grp := range g.m {
			n += len(grp.waiting)
		}
		g.mu.Unlock()
	}
	return n
}
