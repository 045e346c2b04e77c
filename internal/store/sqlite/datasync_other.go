//go:build !linux

package sqlite

import "os"

// datasync is fsync(2) (F_FULLFSYNC on macOS) where fdatasync is missing.
func datasync(f *os.File) error { return f.Sync() }
