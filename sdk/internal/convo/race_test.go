//go:build race

package convo

// raceEnabled: under the race detector sync.Pool drops items at random, so
// allocation counts of pooled helpers are not meaningful (scripts/alloc-tests.sh
// runs these tests without it).
const raceEnabled = true
