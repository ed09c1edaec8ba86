//go:build race

package grpcload

// raceEnabled reports whether the race detector is on.
const raceEnabled = true
