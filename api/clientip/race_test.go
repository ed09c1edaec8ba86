//go:build race

package clientip_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = true
