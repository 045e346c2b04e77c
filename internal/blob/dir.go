package blob

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// dirStore keeps each object as a file under root: key "a/b.c" is the file
// root/a/b.c, so a key's slashes make subdirectories. Directories are
// mode 0700 and files 0600: only the server's user may read retained
// bytes. Attributes live in the database, so there are no sidecar files.
type dirStore struct {
	root string
}

func openDir(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("blob directory: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob directory: %w", err)
	}
	return &Store{b: &dirStore{root: abs}, kind: "file"}, nil
}

func (d *dirStore) path(key string) string { return filepath.Join(d.root, filepath.FromSlash(key)) }

func (d *dirStore) close() error { return nil }

// create writes to a temporary file next to the object, named after it
// ("<object>.<random hex>.tmp"), and commit renames it into place after an
// fsync: the object appears whole or not at all. Next to the object, not in
// os.TempDir, because the data directory may be another mount and a rename
// cannot cross mounts; and with the object's name as its prefix, so the
// orphan sweep's DeletePrefix deletes the temporary files a crash strands.
func (d *dirStore) create(_ context.Context, key string) (objectWriter, error) {
	path := d.path(key)
	if err := d.mkdirs(filepath.Dir(path)); err != nil {
		return nil, err
	}
	for range 10 {
		var r [8]byte
		_, _ = rand.Read(r[:])
		tmp := path + "." + hex.EncodeToString(r[:]) + ".tmp"
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &dirWriter{f: f, path: path}, nil
	}
	return nil, fmt.Errorf("blob: no free temporary name for %s", path)
}

// mkdirs creates dir and its missing parents (mode 0700) below root, and
// syncs each new directory's parent so the entry survives a power loss
// along with the objects committed into it.
func (d *dirStore) mkdirs(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	if dir == d.root || !strings.HasPrefix(dir, d.root+string(filepath.Separator)) {
		return os.MkdirAll(dir, 0o700)
	}
	if err := d.mkdirs(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

type dirWriter struct {
	f    *os.File
	path string
}

func (w *dirWriter) Write(p []byte) (int, error) { return w.f.Write(p) }

// commit syncs the temporary file, renames it to the object's name and
// syncs the directory: once commit returns, the object survives a crash or
// a power loss (the event naming it commits after).
func (w *dirWriter) commit(ctx context.Context) error {
	tmp := w.f.Name()
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = os.Rename(tmp, w.path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(w.path))
}

func (w *dirWriter) abort() {
	_ = w.f.Close()
	_ = os.Remove(w.f.Name())
}

func (d *dirStore) open(_ context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	f, err := os.Open(d.path(key))
	if err != nil {
		return nil, notFound(err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%w: %s is not a file", ErrNotFound, key)
	}
	if err == nil && offset > 0 {
		_, err = f.Seek(offset, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if length < 0 {
		return f, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(f, length), f}, nil
}

// notFound wraps ErrNotFound around a "no such file" error.
func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

func (d *dirStore) remove(_ context.Context, key string) error {
	path := d.path(key)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.IsDir()) {
		return nil // a directory is no object: nothing to delete
	}
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (d *dirStore) exists(_ context.Context, key string) (bool, error) {
	fi, err := os.Stat(d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return fi.Mode().IsRegular(), nil
}

// list walks the directory that holds the prefix's last complete segment:
// nothing above it can match.
func (d *dirStore) list(_ context.Context, prefix string) ([]string, error) {
	start := d.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = d.path(prefix[:i])
	}
	var keys []string
	err := filepath.WalkDir(start, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			// Gone meanwhile (a write committed or aborted, a sweep): not
			// there to list.
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(d.root, path)
		if err != nil || rel == "." {
			return err
		}
		key := filepath.ToSlash(rel)
		if e.IsDir() {
			if dir := key + "/"; !strings.HasPrefix(dir, prefix) && !strings.HasPrefix(prefix, dir) {
				return filepath.SkipDir
			}
			return nil
		}
		if e.Type().IsRegular() && strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return nil
	})
	return keys, err
}
