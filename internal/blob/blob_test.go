package blob_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentowl/agentowl/internal/blob"
	"github.com/agentowl/agentowl/internal/blob/blobtest"
)

func forEachBlobBackend(t *testing.T, fn func(t *testing.T, s *blob.Store, dataDir string)) {
	for _, b := range blobtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fn(t, blobtest.Open(t, b, dir), dir)
		})
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	if _, err := rand.Read(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// put writes p in chunks, as a parser streams a part, and returns its sum.
func put(t *testing.T, s *blob.Store, key string, p []byte) []byte {
	t.Helper()
	w, err := s.Create(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	for rest := p; len(rest) > 0; {
		n := min(len(rest), 32<<10+7)
		if _, err := w.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if w.Size() != int64(len(p)) {
		t.Fatalf("size %d, want %d", w.Size(), len(p))
	}
	sum, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(p)
	if !bytes.Equal(sum, want[:]) {
		t.Fatalf("sum %x, want %x", sum, want)
	}
	return sum
}

func readRange(t *testing.T, s *blob.Store, key string, off, n int64) []byte {
	t.Helper()
	r, err := s.Open(t.Context(), key, off, n)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	forEachBlobBackend(t, func(t *testing.T, s *blob.Store, _ string) {
		ctx := t.Context()
		// 12 MiB crosses the S3 writer's multipart threshold.
		for _, size := range []int{0, 1, 511, 12<<20 + 3} {
			key := blob.Key("tenant-a", "upl_x", "att_"+strings.Repeat("a", size%7+1))
			p := randomBytes(t, size)
			sum := put(t, s, key, p)
			if err := s.Verify(ctx, key, int64(size), sum); err != nil {
				t.Fatalf("verify %d bytes: %v", size, err)
			}
			if got := readRange(t, s, key, 0, -1); !bytes.Equal(got, p) {
				t.Fatalf("read back %d bytes, want %d identical", len(got), size)
			}
			if size > 100 {
				if got := readRange(t, s, key, 10, 50); !bytes.Equal(got, p[10:60]) {
					t.Fatalf("range 10+50 = %d bytes, not the stored ones", len(got))
				}
				if got := readRange(t, s, key, int64(size-5), -1); !bytes.Equal(got, p[size-5:]) {
					t.Fatalf("tail = %x", got)
				}
			}
			if err := s.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Open(ctx, key, 0, -1); !errors.Is(err, blob.ErrNotFound) {
				t.Fatalf("open after delete: %v, want ErrNotFound", err)
			}
			if err := s.Delete(ctx, key); err != nil {
				t.Fatalf("deleting a missing object: %v", err)
			}
		}
	})
}

func TestVerifyRefusesOtherBytes(t *testing.T) {
	t.Parallel()
	forEachBlobBackend(t, func(t *testing.T, s *blob.Store, _ string) {
		key := blob.Key("tenant-a", "upl_v", "att_1")
		p := randomBytes(t, 1000)
		sum := put(t, s, key, p)
		if err := s.Verify(t.Context(), key, 999, sum); !errors.Is(err, blob.ErrCorrupt) {
			t.Fatalf("verify with another size: %v, want ErrCorrupt", err)
		}
		other := sha256.Sum256([]byte("other"))
		if err := s.Verify(t.Context(), key, 1000, other[:]); !errors.Is(err, blob.ErrCorrupt) {
			t.Fatalf("verify with another sum: %v, want ErrCorrupt", err)
		}
		if err := s.Verify(t.Context(), blob.Key("tenant-a", "upl_v", "att_gone"), 1000, sum); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("verify of a missing object: %v, want ErrNotFound", err)
		}
	})
}

func TestAbortStoresNothing(t *testing.T) {
	t.Parallel()
	forEachBlobBackend(t, func(t *testing.T, s *blob.Store, _ string) {
		key := blob.Key("tenant-a", "upl_ab", "att_1")
		w, err := s.Create(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(randomBytes(t, 64<<10)); err != nil {
			t.Fatal(err)
		}
		w.Abort()
		if ok, err := s.Exists(t.Context(), key); err != nil || ok {
			t.Fatalf("after Abort: exists %v, %v", ok, err)
		}
	})
}

func TestDeletePrefix(t *testing.T) {
	t.Parallel()
	forEachBlobBackend(t, func(t *testing.T, s *blob.Store, _ string) {
		ctx := t.Context()
		var gone, kept []string
		for i, id := range []string{"att_1", "att_2", "att_3"} {
			gone = append(gone, blob.Key("tenant-a", "upl_orphan", id))
			kept = append(kept, blob.Key("tenant-a", "upl_other", id), blob.Key("tenant-b", "upl_orphan", id))
			put(t, s, gone[i], randomBytes(t, 10))
		}
		for _, k := range kept {
			put(t, s, k, randomBytes(t, 10))
		}
		n, err := s.DeletePrefix(ctx, blob.GroupPrefix("tenant-a", "upl_orphan"))
		if err != nil || n != 3 {
			t.Fatalf("DeletePrefix = %d, %v; want 3", n, err)
		}
		for _, k := range gone {
			if ok, _ := s.Exists(ctx, k); ok {
				t.Errorf("%s survived", k)
			}
		}
		for _, k := range kept {
			if ok, _ := s.Exists(ctx, k); !ok {
				t.Errorf("%s was deleted", k)
			}
		}
		if _, err := s.DeletePrefix(ctx, "tenant-a"); err == nil {
			t.Fatal("DeletePrefix of a whole tenant's space was allowed")
		}
	})
}

// A crash while the directory store writes strands a temporary file next
// to the object; it shares the upload's prefix and goes with it.
func TestDeletePrefixTakesStrandedTemporaryFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := blobtest.Open(t, blobtest.Backends()[0], dir)
	stranded := filepath.Join(dir, blob.DefaultDir, "tenant-a", "upl_crash.att_1.18a2b3c4d5e6f.tmp")
	if err := os.MkdirAll(filepath.Dir(stranded), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stranded, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeletePrefix(t.Context(), blob.GroupPrefix("tenant-a", "upl_crash"))
	if err != nil || n != 1 {
		t.Fatalf("DeletePrefix = %d, %v", n, err)
	}
	if _, err := os.Stat(stranded); !os.IsNotExist(err) {
		t.Fatalf("stranded file: %v", err)
	}
}

func TestDirectoryIsPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := blobtest.Open(t, blobtest.Backends()[0], dir)
	put(t, s, blob.Key("tenant-a", "upl_p", "att_1"), []byte("secret"))
	for _, p := range []string{filepath.Join(dir, blob.DefaultDir), filepath.Join(dir, blob.DefaultDir, "tenant-a")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v; only the owner may read retained bytes", p, fi.Mode().Perm())
		}
	}
}

func TestOpenURLs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	abs := t.TempDir()
	s, err := blob.Open(ctx, "file://"+abs, "unused")
	if err != nil {
		t.Fatalf("file URL: %v", err)
	}
	if s.Kind() != "file" {
		t.Fatalf("kind %q", s.Kind())
	}
	s.Close()
	for _, bad := range []string{"file://relative/dir", "file:dir", "gs://bucket", "s3://", "http://example.com/bucket",
		"s3://bucket?unknown_option=1", "%zz"} {
		if s, err := blob.Open(ctx, bad, t.TempDir()); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}
