//go:build race

package main

// raceEnabled reports whether this test binary was built with -race; the
// end-to-end tests then build the daemon with -race too.
const raceEnabled = true
