//go:build !race

package redistest

// raceOn reports that the race detector is on (see Quick).
const raceOn = false
