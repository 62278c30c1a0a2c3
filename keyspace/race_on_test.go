//go:build race

package keyspace

// raceEnabled: the race detector drops sync.Pool items at random, so
// allocation counts are not meaningful.
const raceEnabled = true
