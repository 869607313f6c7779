//go:build race

package gemini

// raceEnabled: under the race detector sync.Pool drops items at random, so
// allocation counts of pooled helpers are not meaningful.
const raceEnabled = true
