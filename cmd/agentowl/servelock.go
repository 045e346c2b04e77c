//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// serveLock is the data directory's serve lock: SQLite is for one serving
// process, and the one that holds the lock knows that no other process
// delivers from its database. Offline commands (agentowl admin) do not take
// it. The kernel releases it when the process exits, however it exits.
type serveLock struct{ f *os.File }

// lockDataDir takes dataDir's serve lock, or fails at once when another
// process holds it.
func lockDataDir(dataDir string) (*serveLock, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dataDir, "serve.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another agentowl serve is using %s: the SQLite store is for one process "+
				"(stop it first, or give replicas a PostgreSQL database with AGENTOWL_DATABASE_URL)", dataDir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &serveLock{f: f}, nil
}

// exclusive reports whether the lock proves this process the only one
// serving the database.
func (l *serveLock) exclusive() bool { return l != nil && l.f != nil }

func (l *serveLock) unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	return l.f.Close() // closing the only descriptor releases the lock
}
