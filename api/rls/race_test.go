//go:build race

package rls

// raceEnabled reports whether the race detector is on.
const raceEnabled = true
