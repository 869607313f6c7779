//go:build !race

package respcache

const raceEnabled = false
