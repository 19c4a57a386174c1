//go:build !simrelay_testcost

package account

// TestCostBuild says whether this build hashes passwords at a test's cost
// when its Config names none (cost_testcost.go). Only a build with the
// simrelay_testcost tag does, which make test gives the binaries its tests
// start; make build, make agents and a plain go build never do.
const TestCostBuild = false

// buildPasswordTime and buildPasswordMemory are the cost a Config that
// names none gets: DefaultPasswordTime and DefaultPasswordMemory.
const (
	buildPasswordTime   = DefaultPasswordTime
	buildPasswordMemory = DefaultPasswordMemory
)
