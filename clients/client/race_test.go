//go:build race

package client

// raceEnabled: the race detector is on (long simulations run shorter).
const raceEnabled = true
