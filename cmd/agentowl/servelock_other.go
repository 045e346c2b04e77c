//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

// serveLock: without flock, no lock is taken and no process knows itself
// the only one serving; delivery leases of a dead predecessor then lapse
// in their own time.
type serveLock struct{}

func lockDataDir(string) (*serveLock, error) { return nil, nil }

func (*serveLock) exclusive() bool { return false }

func (*serveLock) unlock() error { return nil }
