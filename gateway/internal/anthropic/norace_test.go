//go:build !race

package anthropic

const raceEnabled = false
