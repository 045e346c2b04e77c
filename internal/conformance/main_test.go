package conformance

import (
	"flag"
	"os"
	"testing"
)

// TestMain lets every test of the package run at once unless -parallel
// says otherwise: they wait on deadlines, long polls, settle windows and
// other processes, not on the CPU, and go test's default (GOMAXPROCS, two
// on CI) would queue them one after another.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		flag.Set("test.parallel", "64")
	}
	os.Exit(m.Run())
}
