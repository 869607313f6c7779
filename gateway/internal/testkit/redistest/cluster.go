package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// NodeTimeout is the cluster-node-timeout of a Cluster's nodes: a master
// that does not answer for this long is marked failed and its replica
// elected in its place, so a killed master's slots are served again about
// a second later.
const NodeTimeout = 500 * time.Millisecond

// clusterTimeout bounds every wait of a Cluster (agreement, failover).
const clusterTimeout = 30 * time.Second

// Cluster is a Redis Cluster of redis-server processes on loopback, owned
// by the test that started it: masters that split the 16384 hash slots
// evenly, each with its replicas. Its methods are safe for concurrent use
// with the cluster serving, but not with each other.
type Cluster struct {
	nodes []*Server
	ids   map[*Server]string
	mu    sync.Mutex // serialises the topology changes (MoveSlot, Failover, KillMaster)
}

// StartCluster starts masters × (1 + replicasPerMaster) redis-server
// processes with cluster mode on, joins them into one cluster, gives master
// i of n the i-th n-th of the slots, attaches the replicas and returns once
// every node reports cluster_state:ok, knows every other node and every
// replica's link to its master is up. Extra arguments go to every node.
//
// A cluster master refuses writes for two seconds after its process starts
// (Redis's CLUSTER_WRITABLE_DELAY), so a cluster is ready about two seconds
// after this is called: tests that start one should run in parallel.
func StartCluster(t testing.TB, masters, replicasPerMaster int, args ...string) *Cluster {
	t.Helper()
	if masters < 1 || masters > 16384 || replicasPerMaster < 0 {
		t.Fatalf("redistest: StartCluster(%d masters, %d replicas each): want 1-16384 masters and replicas >= 0", masters, replicasPerMaster)
	}
	c := &Cluster{ids: map[*Server]string{}}
	nodeArgs := append([]string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.Itoa(int(NodeTimeout / time.Millisecond)),
		// A replica may be elected however long ago it last heard its
		// master (the validity check is for clusters that partition).
		"--cluster-replica-validity-factor", "0",
		"--cluster-allow-replica-migration", "no",
		"--repl-diskless-sync", "yes",
		"--repl-diskless-sync-delay", "0",
	}, args...)
	n := masters * (1 + replicasPerMaster)
	for i := 0; i < n; i++ {
		s := Start(t, nodeArgs...)
		c.nodes = append(c.nodes, s)
	}
	fail := func(format string, a ...any) {
		t.Helper()
		t.Fatalf("redistest: cluster: "+format, a...)
	}
	for i, s := range c.nodes {
		id, err := s.Do("CLUSTER", "MYID")
		if err != nil {
			fail("CLUSTER MYID on %s: %v", s.Addr(), err)
		}
		c.ids[s] = id
		// Distinct epochs up front, so the masters do not first collide.
		if _, err := s.Do("CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			fail("SET-CONFIG-EPOCH on %s: %v", s.Addr(), err)
		}
	}
	for i := 0; i < masters; i++ {
		lo, hi := i*16384/masters, (i+1)*16384/masters-1
		if _, err := c.nodes[i].Do("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			fail("ADDSLOTSRANGE on %s: %v", c.nodes[i].Addr(), err)
		}
	}
	for _, s := range c.nodes[1:] {
		if _, err := s.Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(c.nodes[0].Port())); err != nil {
			fail("CLUSTER MEET from %s: %v", s.Addr(), err)
		}
	}
	// Every node must know every other before a replica can name its master.
	c.wait(t, "every node knows every other", func() bool {
		for _, s := range c.nodes {
			nodes, err := c.table(s)
			if err != nil || len(nodes) != n {
				return false
			}
			for _, e := range nodes {
				if strings.Contains(e.flags, "handshake") || strings.Contains(e.flags, "noaddr") {
					return false
				}
			}
		}
		return true
	})
	for r := masters; r < n; r++ {
		m := c.nodes[(r-masters)%masters]
		if _, err := c.nodes[r].Do("CLUSTER", "REPLICATE", c.ids[m]); err != nil {
			fail("CLUSTER REPLICATE on %s: %v", c.nodes[r].Addr(), err)
		}
	}
	c.wait(t, "cluster_state:ok everywhere, replicas in sync", func() bool { return c.settled(nil) == nil })
	return c
}

// Nodes are every node, masters first (in slot order) as started; roles
// change with failovers: see Masters, Replicas.
func (c *Cluster) Nodes() []*Server { return c.nodes }

// Addrs are the host:port of every node, for a client's seed list.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		a[i] = s.Addr()
	}
	return a
}

// ID is s's cluster node ID.
func (c *Cluster) ID(s *Server) string { return c.ids[s] }

// node is one line of CLUSTER NODES.
type node struct {
	id, addr, flags, master string
	slots                   []string
}

// table is CLUSTER NODES as s sees it.
func (c *Cluster) table(s *Server) ([]node, error) {
	out, err := s.Do("CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	var nodes []node
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		nodes = append(nodes, node{id: f[0], addr: addr, flags: f[2], master: f[3], slots: f[8:]})
	}
	return nodes, nil
}

func (c *Cluster) byID(id string) *Server {
	for s, v := range c.ids {
		if v == id {
			return s
		}
	}
	return nil
}

// live are the nodes that answer PING.
func (c *Cluster) live() []*Server {
	var l []*Server
	for _, s := range c.nodes {
		if ping(s.Addr()) == nil {
			l = append(l, s)
		}
	}
	return l
}

// Masters are the live nodes that are masters now (ROLE).
func (c *Cluster) Masters() []*Server {
	var m []*Server
	for _, s := range c.live() {
		if role, err := s.Do("ROLE"); err == nil && strings.HasPrefix(role, "master") {
			m = append(m, s)
		}
	}
	return m
}

// ReplicasOf are the live replicas of master m.
func (c *Cluster) ReplicasOf(m *Server) []*Server {
	var r []*Server
	for _, s := range c.live() {
		nodes, err := c.table(s)
		if err != nil {
			continue
		}
		for _, e := range nodes {
			if strings.Contains(e.flags, "myself") && strings.Contains(e.flags, "slave") && e.master == c.ids[m] {
				r = append(r, s)
			}
		}
	}
	return r
}

// Slot is the hash slot of key (CLUSTER KEYSLOT).
func (c *Cluster) Slot(key string) (int, error) {
	for _, s := range c.live() {
		out, err := s.Do("CLUSTER", "KEYSLOT", key)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(out)
	}
	return 0, fmt.Errorf("no live node")
}

// Owner is the master that serves slot, as the masters agree (an error if
// they do not, or no live master claims it).
func (c *Cluster) Owner(slot int) (*Server, error) {
	var owner string
	for _, s := range c.Masters() {
		nodes, err := c.table(s)
		if err != nil {
			return nil, err
		}
		o := ownerIn(nodes, slot)
		if owner != "" && o != owner {
			return nil, fmt.Errorf("masters disagree on slot %d: %s and %s", slot, owner, o)
		}
		owner = o
	}
	if owner == "" {
		return nil, fmt.Errorf("no master serves slot %d", slot)
	}
	return c.byID(owner), nil
}

func ownerIn(nodes []node, slot int) string {
	for _, e := range nodes {
		if !strings.Contains(e.flags, "master") || strings.Contains(e.flags, "fail") {
			continue
		}
		for _, r := range e.slots {
			if strings.HasPrefix(r, "[") {
				continue // a migration in progress
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				return e.id
			}
		}
	}
	return ""
}

// MoveSlot moves slot, with its keys, from its owner to master to, as
// redis-cli --cluster reshard does: SETSLOT IMPORTING on to, MIGRATING on
// the owner, MIGRATE of its keys, then SETSLOT NODE on both and on every
// other master. Clients meanwhile get ASK (and TRYAGAIN for a multi-key
// command whose keys are split between the two). step, if not nil, runs
// after each key moved (one MIGRATE a key), so a test can hold the slot
// half migrated while requests run. Moving a slot to its owner is a no-op.
func (c *Cluster) MoveSlot(slot int, to *Server, step func()) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	from, err := c.Owner(slot)
	if err != nil {
		return err
	}
	if from == to {
		return nil
	}
	sl := strconv.Itoa(slot)
	if _, err := to.Do("CLUSTER", "SETSLOT", sl, "IMPORTING", c.ids[from]); err != nil {
		return fmt.Errorf("SETSLOT IMPORTING on %s: %w", to.Addr(), err)
	}
	if _, err := from.Do("CLUSTER", "SETSLOT", sl, "MIGRATING", c.ids[to]); err != nil {
		return fmt.Errorf("SETSLOT MIGRATING on %s: %w", from.Addr(), err)
	}
	for {
		out, err := from.Do("CLUSTER", "GETKEYSINSLOT", sl, "1")
		if err != nil {
			return fmt.Errorf("GETKEYSINSLOT on %s: %w", from.Addr(), err)
		}
		if out == "" {
			break
		}
		if _, err := from.Do("MIGRATE", "127.0.0.1", strconv.Itoa(to.Port()), "", "0", "5000", "KEYS", out); err != nil {
			return fmt.Errorf("MIGRATE %q from %s: %w", out, from.Addr(), err)
		}
		if step != nil {
			step()
		}
	}
	// The new owner first (it bumps its epoch), then the old, then the rest.
	order := []*Server{to, from}
	for _, m := range c.Masters() {
		if m != to && m != from {
			order = append(order, m)
		}
	}
	for _, m := range order {
		if _, err := m.Do("CLUSTER", "SETSLOT", sl, "NODE", c.ids[to]); err != nil {
			return fmt.Errorf("SETSLOT NODE on %s: %w", m.Addr(), err)
		}
	}
	return c.waitErr(func() error {
		o, err := c.Owner(slot)
		if err == nil && o != to {
			err = fmt.Errorf("slot %d still on %s", slot, o.Addr())
		}
		return err
	})
}

// Failover promotes a replica of master m with CLUSTER FAILOVER (graceful:
// the replica catches up with m's replication stream, m stops taking
// writes meanwhile, nothing acknowledged is lost) and returns it once the
// cluster agrees.
func (c *Cluster) Failover(m *Server) (*Server, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reps := c.ReplicasOf(m)
	if len(reps) == 0 {
		return nil, fmt.Errorf("%s has no replica", m.Addr())
	}
	r := reps[0]
	if _, err := r.Do("CLUSTER", "FAILOVER"); err != nil {
		return nil, fmt.Errorf("CLUSTER FAILOVER on %s: %w", r.Addr(), err)
	}
	return r, c.waitErr(func() error { return c.settled(func(s *Server) bool { return s == r }) })
}

// KillMaster SIGKILLs master m, as a crash, and returns its replica that
// the cluster elected in its place once every live node agrees and serves
// again; took is from the kill to then. What m acknowledged but had not
// yet sent to that replica is lost. The killed node stays down.
func (c *Cluster) KillMaster(m *Server) (promoted *Server, took time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reps := c.ReplicasOf(m)
	if len(reps) == 0 {
		return nil, 0, fmt.Errorf("%s has no replica", m.Addr())
	}
	start := time.Now()
	if err := m.Kill(); err != nil {
		return nil, 0, err
	}
	err = c.waitErr(func() error {
		for _, r := range reps {
			if role, err := r.Do("ROLE"); err == nil && strings.HasPrefix(role, "master") {
				promoted = r
			}
		}
		if promoted == nil {
			return fmt.Errorf("no replica of %s promoted", m.Addr())
		}
		return c.settled(nil)
	})
	return promoted, time.Since(start), err
}

// settled reports why the cluster is not settled, or nil: every live node
// says cluster_state:ok and sees the same master for every slot, and
// every live replica's link to its master is up. want, if not nil, must
// hold of some master.
func (c *Cluster) settled(want func(*Server) bool) error {
	live := c.live()
	var ref []string // owner of each slot's range start, by the first node
	found := want == nil
	for _, s := range live {
		info, err := s.Do("CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state not ok", s.Addr())
		}
		nodes, err := c.table(s)
		if err != nil {
			return err
		}
		var owners []string
		for slot := 0; slot < 16384; slot += 512 {
			owners = append(owners, ownerIn(nodes, slot))
		}
		if ref == nil {
			ref = owners
		} else if strings.Join(ref, ",") != strings.Join(owners, ",") {
			return fmt.Errorf("%s sees other slot owners", s.Addr())
		}
		role, err := s.Do("ROLE")
		if err != nil {
			return err
		}
		if strings.HasPrefix(role, "slave") {
			repl, err := s.Do("INFO", "replication")
			if err != nil {
				return err
			}
			if !strings.Contains(repl, "master_link_status:up") || strings.Contains(repl, "master_sync_in_progress:1") {
				return fmt.Errorf("%s: replica not in sync", s.Addr())
			}
		} else if want != nil && want(s) {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("the wanted master is not one yet")
	}
	return nil
}

func (c *Cluster) waitErr(ok func() error) error {
	deadline := time.Now().Add(clusterTimeout)
	for {
		err := ok()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: cluster not settled within %v: %w", clusterTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *Cluster) wait(t testing.TB, what string, ok func() bool) {
	t.Helper()
	if err := c.waitErr(func() error {
		if ok() {
			return nil
		}
		return fmt.Errorf("%s", what)
	}); err != nil {
		t.Fatal(err)
	}
}
