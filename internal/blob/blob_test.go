package blob_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net/url"
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
		// 12 MiB is past the S3 writer's memory, in its temporary file.
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
	for _, p := range []string{filepath.Join(dir, blob.DefaultDir), filepath.Join(dir, blob.DefaultDir, "tenant-a"),
		filepath.Join(dir, blob.DefaultDir, "tenant-a", "upl_p.att_1")} {
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

// An object is invisible while it is written: not there, not readable, and
// in S3 not even listed; Close makes it appear whole.
func TestObjectAppearsOnlyOnClose(t *testing.T) {
	t.Parallel()
	forEachBlobBackend(t, func(t *testing.T, s *blob.Store, _ string) {
		ctx := t.Context()
		key := blob.Key("tenant-a", "upl_w", "att_1")
		w, err := s.Create(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		p := randomBytes(t, 3<<20) // past the S3 writer's memory
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Exists(ctx, key); err != nil || ok {
			t.Fatalf("while writing: exists %v, %v", ok, err)
		}
		if _, err := s.Open(ctx, key, 0, -1); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("open while writing: %v, want ErrNotFound", err)
		}
		keys, err := s.Keys(ctx, "tenant-a/")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k == key {
				t.Fatalf("listed while writing: %v", keys)
			}
		}
		if _, err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got := readRange(t, s, key, 0, -1); !bytes.Equal(got, p) {
			t.Fatalf("read back %d bytes", len(got))
		}
		if keys, err := s.Keys(ctx, "tenant-a/"); err != nil || len(keys) != 1 || keys[0] != key {
			t.Fatalf("keys after Close: %v, %v", keys, err)
		}
		if _, err := w.Close(); err == nil {
			t.Fatal("a second Close succeeded")
		}
		if _, err := w.Write([]byte("more")); err == nil {
			t.Fatal("a Write after Close succeeded")
		}
	})
}

// A write whose context ends before Close stores nothing, temporary files
// included.
func TestCancelledWriteStoresNothing(t *testing.T) {
	t.Parallel()
	forEachBlobBackend(t, func(t *testing.T, s *blob.Store, _ string) {
		for _, size := range []int{10, 3 << 20} {
			ctx, cancel := context.WithCancel(t.Context())
			key := blob.Key("tenant-a", "upl_c", "att_1")
			w, err := s.Create(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(randomBytes(t, size)); err != nil {
				t.Fatal(err)
			}
			cancel()
			if _, err := w.Close(); !errors.Is(err, context.Canceled) {
				t.Fatalf("Close after cancel: %v", err)
			}
			w.Abort() // harmless after Close
			if keys, err := s.Keys(t.Context(), "tenant-a/"); err != nil || len(keys) != 0 {
				t.Fatalf("after a cancelled write of %d bytes: %v, %v", size, keys, err)
			}
		}
	})
}

func TestZeroLengthRange(t *testing.T) {
	t.Parallel()
	forEachBlobBackend(t, func(t *testing.T, s *blob.Store, _ string) {
		key := blob.Key("tenant-a", "upl_z", "att_1")
		put(t, s, key, randomBytes(t, 100))
		if got := readRange(t, s, key, 40, 0); len(got) != 0 {
			t.Fatalf("0 bytes from 40: got %d", len(got))
		}
		if _, err := s.Open(t.Context(), blob.Key("tenant-a", "upl_z", "att_gone"), 0, 0); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("0 bytes of a missing object: %v, want ErrNotFound", err)
		}
		if _, err := s.Open(t.Context(), key, -1, 10); err == nil {
			t.Fatal("a negative offset was accepted")
		}
	})
}

// Keys are made by the server; one that could leave the directory store's
// root, or name different objects in the two back ends, is refused.
func TestInvalidKeys(t *testing.T) {
	t.Parallel()
	forEachBlobBackend(t, func(t *testing.T, s *blob.Store, dataDir string) {
		ctx := t.Context()
		for _, key := range []string{"", "/etc/passwd", "../outside", "t/../../outside", "t/./x", "t//x", "t/", "t\\x", "t/a\x00b", "t/a\nb"} {
			if w, err := s.Create(ctx, key); err == nil {
				w.Abort()
				t.Errorf("Create(%q) succeeded", key)
			}
			if _, err := s.Open(ctx, key, 0, -1); err == nil || errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Open(%q) = %v, want an invalid key", key, err)
			}
			if err := s.Delete(ctx, key); err == nil {
				t.Errorf("Delete(%q) succeeded", key)
			}
			if _, err := s.Exists(ctx, key); err == nil {
				t.Errorf("Exists(%q) succeeded", key)
			}
		}
		for _, prefix := range []string{"../", "/", "t/../x"} {
			if _, err := s.Keys(ctx, prefix); err == nil {
				t.Errorf("Keys(%q) succeeded", prefix)
			}
		}
		if entries, _ := os.ReadDir(filepath.Dir(dataDir)); len(entries) != 1 {
			t.Errorf("something was written next to the data directory: %v", entries)
		}
	})
}

// The directory store writes into a temporary file next to the object,
// named after it, private like the object; Abort removes it.
func TestDirectoryWriteInProgress(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := blobtest.Open(t, blobtest.Backends()[0], dir)
	key := blob.Key("tenant-a", "upl_t", "att_1")
	w, err := s.Create(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("half")); err != nil {
		t.Fatal(err)
	}
	keys, err := s.Keys(t.Context(), blob.GroupPrefix("tenant-a", "upl_t"))
	if err != nil || len(keys) != 1 || !strings.HasPrefix(keys[0], key+".") || !strings.HasSuffix(keys[0], ".tmp") {
		t.Fatalf("keys while writing: %v, %v; want the object's temporary file", keys, err)
	}
	fi, err := os.Stat(filepath.Join(dir, blob.DefaultDir, filepath.FromSlash(keys[0])))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("temporary file: %v, %v; want mode 0600", fi, err)
	}
	w.Abort()
	if entries, err := os.ReadDir(filepath.Join(dir, blob.DefaultDir, "tenant-a")); err != nil || len(entries) != 0 {
		t.Fatalf("after Abort: %v, %v", entries, err)
	}
}

// The S3 store keeps an object being written in memory or in a temporary
// file unlinked at once: nothing shows in the data directory, during the
// write or after it, so a crash strands nothing there.
func TestS3WriteLeavesNothingOnDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := blobtest.Open(t, blobtest.Backends()[1], dir)
	empty := func(when string) {
		t.Helper()
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Fatalf("data directory %s: %v, %v", when, entries, err)
		}
	}
	for i, size := range []int{100, 1 << 20, 1<<20 + 1, 5 << 20} {
		key := blob.Key("tenant-a", "upl_s", itoa(i))
		w, err := s.Create(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		p := randomBytes(t, size)
		for rest := p; len(rest) > 0; rest = rest[min(len(rest), 100_000):] {
			if _, err := w.Write(rest[:min(len(rest), 100_000)]); err != nil {
				t.Fatal(err)
			}
		}
		empty("while writing")
		if i%2 == 0 {
			w.Abort()
			if ok, err := s.Exists(t.Context(), key); err != nil || ok {
				t.Fatalf("after Abort: exists %v, %v", ok, err)
			}
			continue
		}
		sum, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Verify(t.Context(), key, int64(size), sum); err != nil {
			t.Fatal(err)
		}
		empty("after Close")
	}
}

// A missing bucket is a configuration error, not a missing object: an
// attachment read meanwhile must not be recorded missing for good.
func TestS3MissingBucketIsNotNotFound(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(blobtest.S3URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = "no-such-bucket"
	s, err := blob.Open(t.Context(), u.String(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := blob.Key("tenant-a", "upl_m", "att_1")
	if _, err := s.Open(t.Context(), key, 0, -1); err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("open in a missing bucket: %v, want an error other than ErrNotFound", err)
	}
	w, err := s.Create(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(); err == nil {
		t.Fatal("a write into a missing bucket succeeded")
	}
}

// The options of an s3:// URL are gocloud.dev s3blob's, so URLs written for
// it keep working; a mistaken one stops Open (and so serve) at once, naming
// the option. Open makes no request, so nothing here needs a server.
func TestS3URLOptions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	good := []string{
		"s3://bucket?region=eu-west-1",
		"s3://bucket/?region=eu-west-1",
		"s3://bucket?endpoint=https://minio.internal:9000&region=us-east-1&use_path_style=true",
		"s3://bucket?endpoint=http://127.0.0.1:9000&region=us-east-1&s3ForcePathStyle=true&disable_https=true",
		"s3://bucket?endpoint=https://r2.example.com&region=auto&hostname_immutable=true&anonymous=false",
		"s3://bucket?region=us-east-1&ssetype=AES256",
		"s3://bucket?region=us-east-1&ssetype=aws:kms&kmskeyid=1234abcd-12ab-34cd-56ef-1234567890ab",
		"s3://bucket?region=us-east-1&ssetype=AWS:KMS:DSSE",
		"s3://bucket?region=us-east-1&accelerate=true&dualstack=true&fips=false&rate_limiter_capacity=500",
		"s3://bucket?region=us-east-1&request_checksum_calculation=when_required&response_checksum_validation=WHEN_SUPPORTED",
		"s3://bucket?region=us-east-1&role=arn:aws:iam::123456789012:role/agentowl&awssdk=v2",
		"s3://bucket?region=us-east-1&kmskeyid=&disable_https=",
	}
	for _, raw := range good {
		s, err := blob.Open(ctx, raw, t.TempDir())
		if err != nil {
			t.Errorf("Open(%q): %v", raw, err)
			continue
		}
		if s.Kind() != "s3" {
			t.Errorf("Open(%q): kind %q", raw, s.Kind())
		}
		s.Close()
	}
	bad := map[string]string{
		"s3://bucket?region=us-east-1&unknown_option=1":                       "unknown_option",
		"s3://bucket?region=us-east-1&use_path_style=maybe":                   "use_path_style",
		"s3://bucket?region=us-east-1&disable_https=yes":                      "disable_https",
		"s3://bucket?region=us-east-1&anonymous=2":                            "anonymous",
		"s3://bucket?region=us-east-1&endpoint=minio.internal:9000":           "endpoint",
		"s3://bucket?region=us-east-1&endpoint=ftp://minio.internal":          "endpoint",
		"s3://bucket?region=us-east-1&endpoint=https://":                      "endpoint",
		"s3://bucket?region=us-east-1&ssetype=rot13":                          "ssetype",
		"s3://bucket?region=us-east-1&kmskeyid=k":                             "kmskeyid",
		"s3://bucket?region=us-east-1&ssetype=AES256&kmskeyid=k":              "kmskeyid",
		"s3://bucket?region=us-east-1&role=agentowl":                          "role",
		"s3://bucket?region=us-east-1&rate_limiter_capacity=-1":               "rate_limiter_capacity",
		"s3://bucket?region=us-east-1&request_checksum_calculation=always":    "request_checksum_calculation",
		"s3://bucket?region=us-east-1&response_checksum_validation=never":     "response_checksum_validation",
		"s3://bucket?region=us-east-1&region=eu-west-1":                       "region",
		"s3://bucket/some/prefix?region=us-east-1":                            "path",
		"s3://AKIAEXAMPLE:topsecret@bucket?region=us-east-1":                  "credentials",
		"s3://bucket?region=us-east-1&use_path_style=true;disable_https=true": "options",
	}
	for raw, want := range bad {
		s, err := blob.Open(ctx, raw, t.TempDir())
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", raw)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q): %v; want it to name %q", raw, err, want)
		}
		if strings.Contains(err.Error(), "topsecret") {
			t.Errorf("Open(%q): the error repeats the secret: %v", raw, err)
		}
	}
}

// Without a region in the URL or the AWS environment, Open fails at once
// rather than every request later. Not parallel: it empties the AWS
// environment of the process.
func TestS3URLNeedsARegion(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_DEFAULT_PROFILE": "",
		"AWS_CONFIG_FILE": missing, "AWS_SHARED_CREDENTIALS_FILE": missing} {
		t.Setenv(k, v)
	}
	s, err := blob.Open(t.Context(), "s3://bucket?endpoint=http://127.0.0.1:9000&use_path_style=true", t.TempDir())
	if err == nil {
		s.Close()
		t.Fatal("Open without a region succeeded")
	}
	if !strings.Contains(err.Error(), "region") {
		t.Fatalf("Open without a region: %v", err)
	}
	t.Setenv("AWS_REGION", "eu-central-1")
	s, err = blob.Open(t.Context(), "s3://bucket?endpoint=http://127.0.0.1:9000&use_path_style=true", t.TempDir())
	if err != nil {
		t.Fatalf("Open with AWS_REGION: %v", err)
	}
	s.Close()
}

// A replica may keep nothing on disk (PostgreSQL, the secret key in the
// environment): without a data directory, large S3 writes spool in the
// system's temporary directory.
func TestS3WithoutDataDirectory(t *testing.T) {
	t.Parallel()
	s, err := blob.Open(t.Context(), blobtest.S3URL(t), filepath.Join(t.TempDir(), "none"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := blob.Key("tenant-a", "upl_n", "att_1")
	p := randomBytes(t, 3<<20)
	sum := put(t, s, key, p)
	if err := s.Verify(t.Context(), key, int64(len(p)), sum); err != nil {
		t.Fatal(err)
	}
}
