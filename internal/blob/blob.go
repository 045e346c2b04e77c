// Package blob is the private object storage of retained attachment bytes
// (docs/attachments.md): a directory under the data directory by default,
// or any S3-compatible store. Objects are written once under keys that the
// caller makes from the tenant and random IDs (never a sender's file name),
// read back whole or by range, and deleted; nothing here serves a URL, so
// stored bytes reach nobody except through the authorized routes.
//
// It is a building block: it knows keys and bytes, not attachments, ceilings
// or tenants' rules (internal/attachment holds those). The two back ends
// are dir.go (the filesystem) and s3.go (aws-sdk-go-v2's S3 client); both
// keep the one contract below, and every test runs against each
// (blobtest).
package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
)

// ErrNotFound: no object has the key.
var ErrNotFound = errors.New("blob: not found")

// ErrCorrupt: the bytes read back differ from those written.
var ErrCorrupt = errors.New("blob: stored bytes differ from those written")

// Store is one bucket of private objects.
type Store struct {
	b    backend
	kind string
}

// backend is one kind of object store. Keys reach it checked (checkKey).
type backend interface {
	// create starts object key; nothing is visible under key until the
	// returned writer's commit returns nil.
	create(ctx context.Context, key string) (objectWriter, error)
	// open reads length bytes (length < 0: to the end) from offset; an
	// error wrapping ErrNotFound if the object does not exist.
	open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// remove deletes the object; one already gone is no error.
	remove(ctx context.Context, key string) error
	// list returns the keys that start with prefix, in any order.
	list(ctx context.Context, prefix string) ([]string, error)
	exists(ctx context.Context, key string) (bool, error)
	close() error
}

// objectWriter receives one object's bytes; exactly one of commit and
// abort ends it.
type objectWriter interface {
	io.Writer
	commit(ctx context.Context) error
	abort()
}

// DefaultDir is the directory, under the data directory, of the default
// directory store.
const DefaultDir = "attachments"

// Open opens the store that rawURL names:
//
//   - "" — the directory dataDir/attachments, created (mode 0700) if missing;
//   - "file:///absolute/dir" — that directory, created if missing;
//   - "s3://bucket?endpoint=…&region=…" — an S3-compatible bucket (options
//     as s3Options in s3.go lists them, with the names and meanings
//     gocloud.dev's s3blob gave them: use_path_style=true for most
//     self-hosted stores, disable_https, ssetype, kmskeyid, …; an unknown
//     one is an error). Credentials come from the AWS environment
//     (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, a profile, the instance's
//     role). Objects being written wait in memory or in an unlinked
//     temporary file in dataDir (os.TempDir if there is no such directory)
//     until they are complete.
//
// The S3 endpoint is operator configuration, like the database URL: its
// connections do not pass the SSRF check of internal/egress, which would
// refuse the private addresses object stores usually have. Open makes no
// network request.
func Open(ctx context.Context, rawURL, dataDir string) (*Store, error) {
	if rawURL == "" {
		return openDir(filepath.Join(dataDir, DefaultDir))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("blob URL: %w", err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" || !filepath.IsAbs(u.Path) || u.RawQuery != "" {
			return nil, fmt.Errorf("blob URL %q: a file URL names an absolute directory, file:///path, without options", rawURL)
		}
		return openDir(u.Path)
	case "s3":
		if u.Host == "" {
			return nil, fmt.Errorf("blob URL %q: an s3 URL names its bucket, s3://bucket?region=…", rawURL)
		}
		b, err := openS3(ctx, u, dataDir)
		if err != nil {
			return nil, fmt.Errorf("blob URL %s: %w", redact(u), err)
		}
		return &Store{b: b, kind: "s3"}, nil
	}
	return nil, fmt.Errorf("blob URL %q: the scheme must be file or s3", rawURL)
}

// redact is the URL without its user information, which must not reach
// logs (openS3 refuses it, but says so without repeating it).
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// Kind names the back end: "file" or "s3".
func (s *Store) Kind() string { return s.kind }

// Close releases the store.
func (s *Store) Close() error { return s.b.close() }

// Writer streams one object's bytes to the store while computing their
// SHA-256 and size. The object exists only once Close returns nil; Abort
// (or a failed Close) leaves none.
type Writer struct {
	w    objectWriter
	ctx  context.Context
	hash hash.Hash
	size int64
	done bool
}

// Create starts writing the object key, replacing none: keys are random.
// ctx governs the whole write: once it is done, Close fails and stores
// nothing.
func (s *Store) Create(ctx context.Context, key string) (*Writer, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	w, err := s.b.create(ctx, key)
	if err != nil {
		return nil, err
	}
	return &Writer{w: w, ctx: ctx, hash: sha256.New()}, nil
}

// Write implements io.Writer.
func (w *Writer) Write(p []byte) (int, error) {
	if w.done {
		return 0, errors.New("blob: write to a finished writer")
	}
	n, err := w.w.Write(p)
	w.hash.Write(p[:n])
	w.size += int64(n)
	return n, err
}

// Size is the number of bytes written so far.
func (w *Writer) Size() int64 { return w.size }

// Close finishes the object and returns its SHA-256.
func (w *Writer) Close() ([]byte, error) {
	if w.done {
		return nil, errors.New("blob: writer already finished")
	}
	w.done = true
	if err := w.ctx.Err(); err != nil {
		w.w.abort()
		return nil, err
	}
	if err := w.w.commit(w.ctx); err != nil {
		return nil, err
	}
	return w.hash.Sum(nil), nil
}

// Abort abandons the object: nothing of it stays stored.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.w.abort()
}

// Verify reads the object key back and reports ErrCorrupt unless it holds
// exactly size bytes whose SHA-256 is sum (ErrNotFound if it is gone).
// Ingest calls it before the event commits, so a committed manifest never
// names bytes that were not stored.
func (s *Store) Verify(ctx context.Context, key string, size int64, sum []byte) error {
	r, err := s.Open(ctx, key, 0, -1)
	if err != nil {
		return err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return err
	}
	if n != size || !bytes.Equal(h.Sum(nil), sum) {
		return fmt.Errorf("%w: %s", ErrCorrupt, key)
	}
	return nil
}

// Open reads length bytes of object key from offset (length < 0: to the
// end). ErrNotFound if the object is gone.
func (s *Store) Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("blob: negative offset %d", offset)
	}
	return s.b.open(ctx, key, offset, length)
}

// Delete removes object key; an object already gone is no error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	return s.b.remove(ctx, key)
}

// DeletePrefix removes every object whose key starts with prefix (an
// abandoned upload's objects, with any temporary files a crash left) and
// returns how many.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	if prefix == "" || !strings.Contains(prefix, "/") {
		return 0, errors.New("blob: DeletePrefix needs a key prefix below a tenant")
	}
	keys, err := s.Keys(ctx, prefix)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		if err := s.b.remove(ctx, k); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Keys lists the keys that start with prefix ("" for all), in key order:
// for inspection and tests, never on a request's path. In the directory
// store they include the temporary files of writes not finished (or
// stranded by a crash), which share their object's key as a prefix.
func (s *Store) Keys(ctx context.Context, prefix string) ([]string, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	keys, err := s.b.list(ctx, prefix)
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	return keys, nil
}

// Exists reports whether object key exists.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	return s.b.exists(ctx, key)
}

// Key is the key of object id of upload group in tenant's space:
// "tenant/group.id". Every part is an ID the server made (a tenant's ID,
// random upload and attachment IDs); none comes from a sender.
func Key(tenant, group, id string) string { return GroupPrefix(tenant, group) + id }

// GroupPrefix is the key prefix shared by the objects of one upload group,
// which DeletePrefix removes together.
func GroupPrefix(tenant, group string) string { return tenant + "/" + group + "." }

// checkKey refuses a key that is not a relative slash-separated path of
// plain segments. Keys are made by the server (Key), so this guards against
// a bug, not a sender; it keeps a key inside the directory store's root,
// and makes a key mean the same object in both back ends.
func checkKey(key string) error {
	if key == "" || strings.HasSuffix(key, "/") {
		return fmt.Errorf("blob: invalid key %q", key)
	}
	return checkPrefix(key)
}

// checkPrefix is checkKey for a key prefix, which may end in "/" or in the
// middle of a segment.
func checkPrefix(prefix string) error {
	if strings.HasPrefix(prefix, "/") || strings.ContainsFunc(prefix, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return fmt.Errorf("blob: invalid key %q", prefix)
	}
	segs := strings.Split(prefix, "/")
	for i, seg := range segs {
		last := i == len(segs)-1
		if (seg == "" && !last) || seg == "." || seg == ".." {
			return fmt.Errorf("blob: invalid key %q", prefix)
		}
	}
	return nil
}
