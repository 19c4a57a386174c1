package stripemock

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Run(m, (*testing.M).Run)) }
