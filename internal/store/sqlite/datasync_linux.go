package sqlite

import (
	"os"
	"syscall"
)

// datasync is fdatasync(2), as SQLite syncs on Linux: the WAL's data and
// its size, without the file's timestamps.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
