package blob

import (
	"bytes"
	"crypto/rand"
	"io"
	"net/url"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func TestParseS3URL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]s3Options{
		"s3://b?region=r": {bucket: "b", region: "r"},
		"s3://b?endpoint=https://m:9000&region=us-east-1&use_path_style=true&disable_https=true": {
			bucket: "b", region: "us-east-1", endpoint: "https://m:9000", pathStyle: true, disableHTTPS: true},
		"s3://b?use_path_style=false&s3ForcePathStyle=true": {bucket: "b", pathStyle: true},
		"s3://b?hostname_immutable=true":                    {bucket: "b", pathStyle: true},
		"s3://b?anonymous=true&profile=p&role=arn:aws:iam::1:role/x&fips=1&dualstack=t&accelerate=TRUE": {
			bucket: "b", anonymous: true, profile: "p", role: "arn:aws:iam::1:role/x", fips: true, dualstack: true, accelerate: true},
		"s3://b?ssetype=aws:kms&kmskeyid=k": {bucket: "b", sse: types.ServerSideEncryptionAwsKms, kmsKeyID: "k"},
		"s3://b?ssetype=aes256":             {bucket: "b", sse: types.ServerSideEncryptionAes256},
		"s3://b?rate_limiter_capacity=7":    {bucket: "b", rateLimit: 7},
		"s3://b?request_checksum_calculation=when_required&response_checksum_validation=when_required": {bucket: "b",
			requestChecksum: aws.RequestChecksumCalculationWhenRequired, requestChecksumSet: true,
			responseChecksum: aws.ResponseChecksumValidationWhenRequired, responseChecksumValidSet: true},
		"s3://b?region=&awssdk=v1": {bucket: "b"},
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseS3URL(u)
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		if *got != want {
			t.Errorf("%s:\n got %+v\nwant %+v", raw, *got, want)
		}
	}
}

func TestSpool(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, 1, 999, 1000, 1001, 5000} {
		dir := t.TempDir()
		s := &spool{dir: dir, limit: 1000}
		p := make([]byte, size)
		_, _ = rand.Read(p)
		for rest := p; len(rest) > 0; rest = rest[min(len(rest), 333):] {
			if n, err := s.Write(rest[:min(len(rest), 333)]); err != nil || n != min(len(rest), 333) {
				t.Fatalf("write: %d, %v", n, err)
			}
		}
		if (s.f != nil) != (size > 1000) {
			t.Fatalf("%d bytes: file %v, want one only past the limit", size, s.f != nil)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("%d bytes: the spool file has a name: %v", size, entries)
		}
		if s.size != int64(size) {
			t.Fatalf("size %d, want %d", s.size, size)
		}
		for range 2 { // a retry reads it all again
			r, err := s.reader()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Seek(0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, p) {
				t.Fatalf("%d bytes: read back %d, %v", size, len(got), err)
			}
		}
		s.close()
	}
}

func TestSpoolWriteFailureSticks(t *testing.T) {
	t.Parallel()
	s := &spool{dir: "/nonexistent-dir-of-agentowl-tests", limit: 10}
	if _, err := s.Write(make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(make([]byte, 10)); err == nil {
		t.Fatal("spilling into a missing directory succeeded")
	}
	if _, err := s.Write(make([]byte, 1)); err == nil {
		t.Fatal("a write after a failed one succeeded")
	}
	if _, err := s.reader(); err == nil {
		t.Fatal("the spool of a failed write was readable")
	}
}
