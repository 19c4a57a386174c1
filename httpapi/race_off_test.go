//go:build !race

package httpapi_test

// raceEnabled: the test binary runs under the race detector (go test
// -race, as make test's first pass), which makes each job of the soak
// test several times dearer.
const raceEnabled = false
