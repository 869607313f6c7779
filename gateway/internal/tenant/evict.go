package tenant

// Eviction: the index from tenants and plans to the keys cached for them,
// the Evict* methods and the store's change notifications that call them.

import (
	"encoding/hex"
	"fmt"
	"strings"
)

func (c *Cache) indexLocked(h KeyHash, o owner) {
	if old, ok := c.owners[h]; ok {
		if old == o {
			return
		}
		c.unindexLocked(h)
	}
	c.owners[h] = o
	addToSet(c.byTenant, o.tenant, h)
	addToSet(c.byPlan, o.plan, h)
}

func (c *Cache) unindexLocked(h KeyHash) {
	o, ok := c.owners[h]
	if !ok {
		return
	}
	delete(c.owners, h)
	removeFromSet(c.byTenant, o.tenant, h)
	removeFromSet(c.byPlan, o.plan, h)
}

func addToSet(m map[string]map[KeyHash]struct{}, k string, h KeyHash) {
	s := m[k]
	if s == nil {
		s = make(map[KeyHash]struct{})
		m[k] = s
	}
	s[h] = struct{}{}
}

func removeFromSet(m map[string]map[KeyHash]struct{}, k string, h KeyHash) {
	if s := m[k]; s != nil {
		delete(s, h)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

// EvictKey drops the cached entry of the key with hash h; a load of it in
// flight will not insert what it read.
func (c *Cache) EvictKey(h KeyHash) {
	c.evict(func() []uint64 {
		c.staleFlightLocked(keyFlight(h))
		c.unindexLocked(h)
		return []uint64{keySlot(h)}
	})
}

// EvictTenant drops every cached key of the tenant. Since the tenant of a
// key being loaded for the first time is unknown, every key load in flight
// is discarded too.
func (c *Cache) EvictTenant(tenantID string) {
	c.evict(func() []uint64 { return c.evictSetLocked(c.byTenant[tenantID]) })
}

// EvictPlan drops every cached key whose snapshot has the plan (and, as
// EvictTenant, every key load in flight).
func (c *Cache) EvictPlan(planID string) {
	c.evict(func() []uint64 { return c.evictSetLocked(c.byPlan[planID]) })
}

// EvictPrice drops the cached price of model.
func (c *Cache) EvictPrice(model string) {
	c.evict(func() []uint64 {
		c.staleFlightLocked(priceFlight(model))
		return []uint64{c.priceSlot(model)}
	})
}

// EvictAll drops every entry and discards every load in flight.
func (c *Cache) EvictAll() {
	c.evict(func() []uint64 {
		c.epoch.Add(1) // entries of older epochs are ignored from now on
		for flight := range c.inflight {
			c.staleFlightLocked(flight)
		}
		clear(c.owners)
		clear(c.byTenant)
		clear(c.byPlan)
		return nil
	})
}

// evict runs mark under c.mu (it invalidates loads and the index and
// returns the slots to delete), then deletes the slots outside the lock: a
// load that commits in between began after the eviction, so its value is
// current and deleting it only costs a miss.
func (c *Cache) evict(mark func() []uint64) {
	c.stats.evictions.Add(1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	slots := mark()
	c.busy.Add(1)
	c.mu.Unlock()
	defer c.busy.Done()
	for _, s := range slots {
		c.rc.Del(s)
	}
	if len(slots) > 0 {
		// A load that committed just before may still sit in ristretto's
		// buffer, ahead of the deletes; once Wait returns, both are applied
		// and no Get after the eviction can see the old value.
		c.rc.Wait()
	}
}

// staleFlightLocked makes the loads of flight in progress insert nothing,
// and makes later callers start a new load instead of joining them.
func (c *Cache) staleFlightLocked(flight string) {
	for _, t := range c.inflight[flight] {
		t.stale = true
	}
	delete(c.inflight, flight)
	c.sf.Forget(flight)
}

// evictSetLocked unindexes the keys in set, stales every key load in flight,
// and returns the keys' slots.
func (c *Cache) evictSetLocked(set map[KeyHash]struct{}) []uint64 {
	for flight := range c.inflight {
		if flight[0] == 'k' {
			c.staleFlightLocked(flight)
		}
	}
	slots := make([]uint64, 0, len(set))
	for h := range set {
		slots = append(slots, keySlot(h))
		c.unindexLocked(h) // deletes from set while ranging: allowed
	}
	return slots
}

// HandleNotify applies one eviction notification (as sent on the store's
// change channel): "key:<64 hex digits of the hash>", "tenant:<id>",
// "plan:<id>", "price:<model>" or "all". Anything else evicts everything,
// the safe default, and returns an error wrapping ErrUnknownNotification.
func (c *Cache) HandleNotify(payload string) error {
	kind, arg, _ := strings.Cut(payload, ":")
	switch {
	case payload == "all":
		c.EvictAll()
		return nil
	case kind == "key":
		var h KeyHash
		if len(arg) == hex.EncodedLen(len(h)) {
			if _, err := hex.Decode(h[:], []byte(arg)); err == nil {
				c.EvictKey(h)
				return nil
			}
		}
	case kind == "tenant" && arg != "":
		c.EvictTenant(arg)
		return nil
	case kind == "plan" && arg != "":
		c.EvictPlan(arg)
		return nil
	case kind == "price" && arg != "":
		c.EvictPrice(arg)
		return nil
	}
	c.EvictAll()
	if len(payload) > 80 {
		payload = payload[:80] + "…"
	}
	return fmt.Errorf("%w %q: evicted everything", ErrUnknownNotification, payload)
}
