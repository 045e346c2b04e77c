// Package blob is the private object storage of retained attachment bytes
// (docs/attachments.md): a directory under the data directory by default,
// or any S3-compatible store. Objects are written once under keys that the
// caller makes from the tenant and random IDs (never a sender's file name),
// read back whole or by range, and deleted; nothing here serves a URL, so
// stored bytes reach nobody except through the authorized routes.
//
// It is a building block: it knows keys and bytes, not attachments, ceilings
// or tenants' rules (internal/attachment holds those).
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
	"os"
	"path/filepath"
	"strings"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
)

// ErrNotFound: no object has the key.
var ErrNotFound = errors.New("blob: not found")

// ErrCorrupt: the bytes read back differ from those written.
var ErrCorrupt = errors.New("blob: stored bytes differ from those written")

// Store is one bucket of private objects.
type Store struct {
	bucket *gcblob.Bucket
	kind   string
}

// DefaultDir is the directory, under the data directory, of the default
// directory store.
const DefaultDir = "attachments"

// Open opens the store that rawURL names:
//
//   - "" — the directory dataDir/attachments, created (mode 0700) if missing;
//   - "file:///absolute/dir" — that directory, created if missing;
//   - "s3://bucket?endpoint=…&region=…" — an S3-compatible bucket (options
//     as gocloud.dev/blob/s3blob documents them: use_path_style=true for
//     most self-hosted stores, disable_https, …). Credentials come from the
//     AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, a profile).
//
// The S3 endpoint is operator configuration, like the database URL: its
// connections do not pass the SSRF check of internal/egress, which would
// refuse the private addresses object stores usually have.
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
	case s3blob.Scheme:
		if u.Host == "" {
			return nil, fmt.Errorf("blob URL %q: an s3 URL names its bucket, s3://bucket?region=…", rawURL)
		}
		b, err := (&s3blob.URLOpener{}).OpenBucketURL(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("blob URL: %w", err)
		}
		return &Store{bucket: b, kind: "s3"}, nil
	}
	return nil, fmt.Errorf("blob URL %q: the scheme must be file or s3", rawURL)
}

func openDir(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("blob directory: %w", err)
	}
	// Temporary files go next to their object (the data directory may be
	// another mount than os.TempDir, and a rename cannot cross mounts); the
	// orphan sweep deletes those a crash strands, as they share the key's
	// prefix. Attributes live in the database, so no sidecar files.
	b, err := fileblob.OpenBucket(dir, &fileblob.Options{NoTempDir: true, DirFileMode: 0o700,
		Metadata: fileblob.MetadataDontWrite})
	if err != nil {
		return nil, fmt.Errorf("blob directory: %w", err)
	}
	return &Store{bucket: b, kind: "file"}, nil
}

// Kind names the back end: "file" or "s3".
func (s *Store) Kind() string { return s.kind }

// Close releases the store.
func (s *Store) Close() error { return s.bucket.Close() }

// Writer streams one object's bytes to the store while computing their
// SHA-256 and size. The object exists only once Close returns nil; Abort
// (or a failed Close) leaves none.
type Writer struct {
	w      *gcblob.Writer
	cancel context.CancelFunc
	hash   hash.Hash
	size   int64
	done   bool
}

// Create starts writing the object key, replacing none: keys are random.
func (s *Store) Create(ctx context.Context, key string) (*Writer, error) {
	ctx, cancel := context.WithCancel(ctx)
	// The stored content type is never used (downloads are always
	// application/octet-stream); setting it turns off gocloud's sniffing
	// buffer.
	w, err := s.bucket.NewWriter(ctx, key, &gcblob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		cancel()
		return nil, err
	}
	return &Writer{w: w, cancel: cancel, hash: sha256.New()}, nil
}

// Write implements io.Writer.
func (w *Writer) Write(p []byte) (int, error) {
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
	defer w.cancel()
	if err := w.w.Close(); err != nil {
		return nil, err
	}
	return w.hash.Sum(nil), nil
}

// Abort abandons the object: cancelling the write before Close discards
// what was written (gocloud's contract for every driver).
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.cancel()
	_ = w.w.Close()
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
		return s.wrap(err)
	}
	if n != size || !bytes.Equal(h.Sum(nil), sum) {
		return fmt.Errorf("%w: %s", ErrCorrupt, key)
	}
	return nil
}

// Open reads length bytes of object key from offset (length < 0: to the
// end). ErrNotFound if the object is gone.
func (s *Store) Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	r, err := s.bucket.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, s.wrap(err)
	}
	return r, nil
}

// Delete removes object key; an object already gone is no error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return err
	}
	return nil
}

// DeletePrefix removes every object whose key starts with prefix (an
// abandoned upload's objects, with any temporary files a crash left) and
// returns how many.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	if prefix == "" || !strings.Contains(prefix, "/") {
		return 0, errors.New("blob: DeletePrefix needs a key prefix below a tenant")
	}
	n := 0
	it := s.bucket.List(&gcblob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if obj.IsDir {
			continue
		}
		if err := s.Delete(ctx, obj.Key); err != nil {
			return n, err
		}
		n++
	}
}

// Keys lists the keys that start with prefix ("" for all), in key order:
// for inspection and tests, never on a request's path.
func (s *Store) Keys(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	it := s.bucket.List(&gcblob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if !obj.IsDir {
			out = append(out, obj.Key)
		}
	}
}

// Exists reports whether object key exists.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	return s.bucket.Exists(ctx, key)
}

func (s *Store) wrap(err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// Key is the key of object id of upload group in tenant's space:
// "tenant/group.id". Every part is an ID the server made (a tenant's ID,
// random upload and attachment IDs); none comes from a sender.
func Key(tenant, group, id string) string { return GroupPrefix(tenant, group) + id }

// GroupPrefix is the key prefix shared by the objects of one upload group,
// which DeletePrefix removes together.
func GroupPrefix(tenant, group string) string { return tenant + "/" + group + "." }
