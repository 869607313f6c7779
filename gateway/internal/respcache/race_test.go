//go:build race

package respcache

const raceEnabled = true
