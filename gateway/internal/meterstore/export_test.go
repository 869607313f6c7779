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
