package blob_test

import (
	"io"
	"testing"

	"github.com/agentowl/agentowl/internal/blob"
	"github.com/agentowl/agentowl/internal/blob/blobtest"
)

// BenchmarkWrite streams a 10 MiB object in 32 KiB writes and closes it;
// BenchmarkVerify reads it back and checks its SHA-256 (what ingest does
// before commit); BenchmarkRead reads it whole. MB/s per back end.
func BenchmarkWrite(b *testing.B) {
	onEachStore(b, func(b *testing.B, s *blob.Store) {
		data := make([]byte, 10<<20)
		b.SetBytes(int64(len(data)))
		for i := 0; b.Loop(); i++ {
			w, err := s.Create(b.Context(), blob.Key("t", "bench", itoa(i)))
			if err != nil {
				b.Fatal(err)
			}
			for p := data; len(p) > 0; p = p[32<<10:] {
				if _, err := w.Write(p[:32<<10]); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// onEachStore runs bench on a fresh store of each back end.
func onEachStore(b *testing.B, bench func(b *testing.B, s *blob.Store)) {
	for _, bb := range blobtest.Backends() {
		b.Run(bb.Name, func(b *testing.B) { bench(b, blobtest.Open(b, bb, b.TempDir())) })
	}
}

func stored(b *testing.B, s *blob.Store) (string, []byte) {
	b.Helper()
	key := blob.Key("t", "bench", "read")
	w, err := s.Create(b.Context(), key)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 10<<20)); err != nil {
		b.Fatal(err)
	}
	sum, err := w.Close()
	if err != nil {
		b.Fatal(err)
	}
	return key, sum
}

func BenchmarkVerify(b *testing.B) {
	onEachStore(b, func(b *testing.B, s *blob.Store) {
		key, sum := stored(b, s)
		b.SetBytes(10 << 20)
		for b.Loop() {
			if err := s.Verify(b.Context(), key, 10<<20, sum); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkRead(b *testing.B) {
	onEachStore(b, func(b *testing.B, s *blob.Store) {
		key, _ := stored(b, s)
		b.SetBytes(10 << 20)
		for b.Loop() {
			r, err := s.Open(b.Context(), key, 0, -1)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, r); err != nil {
				b.Fatal(err)
			}
			r.Close()
		}
	})
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
