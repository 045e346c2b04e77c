// Package blobtest gives tests both object-store back ends: a fresh
// directory, and a fresh bucket of an in-process S3 server
// (github.com/johannesboyne/gofakes3), so every test of retained bytes runs
// against each.
package blobtest

import (
	"crypto/rand"
	"encoding/hex"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/agentowl/agentowl/internal/blob"
)

// Backend is one object-store kind a test runs against.
type Backend struct {
	Name string
	// URL returns the AGENTOWL_BLOB_URL of a fresh, empty store for t: ""
	// (the data directory's default) for "file", an s3:// URL for "s3".
	URL func(t testing.TB) string
}

// Backends returns the directory store and the S3 store.
func Backends() []Backend {
	return []Backend{
		{Name: "file", URL: func(testing.TB) string { return "" }},
		{Name: "s3", URL: S3URL},
	}
}

var (
	s3Once sync.Once
	s3Srv  *httptest.Server
	s3Mem  *s3mem.Backend
	s3Mu   sync.Mutex
)

// S3URL creates a fresh bucket in the process's in-process S3 server
// (started on first use) and returns its s3:// URL. The server checks no
// signatures, so the URL asks for anonymous access.
func S3URL(t testing.TB) string {
	t.Helper()
	s3Once.Do(func() {
		s3Mem = s3mem.New()
		s3Srv = httptest.NewServer(gofakes3.New(s3Mem, gofakes3.WithIntegrityCheck(true)).Server())
	})
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "test-" + hex.EncodeToString(b[:])
	s3Mu.Lock()
	err := s3Mem.CreateBucket(name)
	s3Mu.Unlock()
	if err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	q := url.Values{"endpoint": {s3Srv.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}, "anonymous": {"true"}}
	return "s3://" + name + "?" + q.Encode()
}

// Open opens the store of backend b for t (dataDir holds the directory
// store) and closes it at test end.
func Open(t testing.TB, b Backend, dataDir string) *blob.Store {
	t.Helper()
	s, err := blob.Open(t.Context(), b.URL(t), dataDir)
	if err != nil {
		t.Fatalf("open %s store: %v", b.Name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
