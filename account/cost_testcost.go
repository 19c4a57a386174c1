//go:build simrelay_testcost

package account

// TestCostBuild: this build was made with the simrelay_testcost tag, for
// the tests that run simrelay as a child process (make test's
// test-binaries). A Config that names no cost hashes at the tests' cost
// (t=1, m=64 KiB), as the in-process tests' Configs name it: at the
// default cost, the admin create-company and the logins of those tests
// were 12 s of a core in each make test. The server logs a warning at its
// start in such a build; never ship one.
const TestCostBuild = true

const (
	buildPasswordTime   = 1
	buildPasswordMemory = 64
)
