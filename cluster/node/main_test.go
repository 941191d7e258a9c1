package node_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestMain runs up to four of the parallel tests at once, unless
// -parallel says otherwise. The node tests mostly wait (for elections,
// gossip, timeouts), so go test's default of GOMAXPROCS at once, two on a
// two-core machine, leaves the CPU idle. Tests that bound how long
// something takes (failover, catch-up, a nack's promptness), that rely on
// hibernation timers of a few hundred milliseconds, that keep the CPU
// busy (TestLaggingFollowerSnapshot's churn), or that change
// package settings (SetMaintainInterval) do not call t.Parallel: they run
// alone, before the parallel ones.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(max(4, runtime.GOMAXPROCS(0)))); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
