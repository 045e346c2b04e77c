package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

// s3Options are the query options of an s3:// URL. The names and meanings
// are those gocloud.dev's s3blob (which this package used before) gave
// them, so a URL that worked then works now; an option not listed here is
// an error, and an empty value is the option not given.
//
//   - region: the bucket's region (else AWS_REGION or the profile's); one
//     is required.
//   - endpoint: an http:// or https:// URL, for S3-compatible stores.
//   - use_path_style (or s3ForcePathStyle): true puts the bucket in the
//     path rather than the host name, as most self-hosted stores need.
//   - hostname_immutable: true leaves the endpoint's host name as it is,
//     which means path style too.
//   - disable_https: true sends requests over http.
//   - anonymous: true signs no request (public buckets, test servers).
//   - profile: the shared-configuration profile for credentials.
//   - role: an IAM role ARN assumed through STS.
//   - ssetype (AES256, aws:kms, aws:kms:dsse) and kmskeyid: server-side
//     encryption of the objects written, for buckets whose policy demands it.
//   - accelerate, dualstack, fips: AWS's endpoint variants.
//   - rate_limiter_capacity: the SDK's client-side retry token bucket; off
//     unless given, so a burst of failures never makes the client refuse
//     to retry on its own.
//   - request_checksum_calculation, response_checksum_validation:
//     when_supported (the SDK's default) or when_required, which some
//     S3-compatible stores need.
//   - awssdk: ignored (it chose gocloud's SDK version).
type s3Options struct {
	bucket                   string
	region, endpoint         string
	profile, role            string
	pathStyle, disableHTTPS  bool
	anonymous                bool
	accelerate, dualstack    bool
	fips                     bool
	rateLimit                uint
	sse                      types.ServerSideEncryption
	kmsKeyID                 string
	requestChecksum          aws.RequestChecksumCalculation
	responseChecksum         aws.ResponseChecksumValidation
	requestChecksumSet       bool
	responseChecksumValidSet bool
}

// parseS3URL reads an s3:// URL's bucket and options without touching the
// network or the environment.
func parseS3URL(u *url.URL) (*s3Options, error) {
	if u.User != nil {
		return nil, errors.New("credentials do not go in the URL: they come from the AWS environment")
	}
	if u.Path != "" && u.Path != "/" {
		return nil, errors.New("an s3 URL names a bucket, not a path in it: s3://bucket?region=…")
	}
	if u.Fragment != "" {
		return nil, errors.New("an s3 URL has no fragment")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("options: %w", err)
	}
	o := &s3Options{bucket: u.Host}
	for name, values := range q {
		if len(values) > 1 {
			return nil, fmt.Errorf("option %s is given %d times", name, len(values))
		}
		v := values[0]
		if v == "" {
			continue
		}
		boolean := func(dst *bool) {
			if err == nil {
				*dst, err = strconv.ParseBool(v)
			}
		}
		switch name {
		case "region":
			o.region = v
		case "endpoint":
			e, perr := url.Parse(v)
			if perr != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
				err = errors.New("not an http:// or https:// URL")
			}
			o.endpoint = v
		case "use_path_style", "s3ForcePathStyle":
			var b bool
			if boolean(&b); b {
				o.pathStyle = true
			}
		case "hostname_immutable":
			var b bool
			if boolean(&b); b {
				o.pathStyle = true
			}
		case "disable_https":
			boolean(&o.disableHTTPS)
		case "anonymous":
			boolean(&o.anonymous)
		case "accelerate":
			boolean(&o.accelerate)
		case "dualstack":
			boolean(&o.dualstack)
		case "fips":
			boolean(&o.fips)
		case "profile":
			o.profile = v
		case "role":
			if !strings.HasPrefix(v, "arn:") {
				err = errors.New("not a role ARN (arn:…)")
			}
			o.role = v
		case "ssetype":
			err = errors.New("not one of AES256, aws:kms, aws:kms:dsse")
			for _, t := range []types.ServerSideEncryption{types.ServerSideEncryptionAes256, types.ServerSideEncryptionAwsKms, types.ServerSideEncryptionAwsKmsDsse} {
				if strings.EqualFold(v, string(t)) {
					o.sse, err = t, nil
				}
			}
		case "kmskeyid":
			o.kmsKeyID = v
		case "rate_limiter_capacity":
			var n uint64
			n, err = strconv.ParseUint(v, 10, 31)
			o.rateLimit = uint(n)
		case "request_checksum_calculation":
			o.requestChecksumSet = true
			o.requestChecksum, err = checksumMode(v, aws.RequestChecksumCalculationWhenSupported, aws.RequestChecksumCalculationWhenRequired)
		case "response_checksum_validation":
			o.responseChecksumValidSet = true
			o.responseChecksum, err = checksumMode(v, aws.ResponseChecksumValidationWhenSupported, aws.ResponseChecksumValidationWhenRequired)
		case "awssdk":
		default:
			return nil, fmt.Errorf("unknown option %q", name)
		}
		if err != nil {
			return nil, fmt.Errorf("option %s=%q: %w", name, v, err)
		}
	}
	if o.kmsKeyID != "" && o.sse != types.ServerSideEncryptionAwsKms && o.sse != types.ServerSideEncryptionAwsKmsDsse {
		return nil, errors.New("option kmskeyid needs ssetype=aws:kms or aws:kms:dsse")
	}
	return o, nil
}

// s3Store keeps objects in one bucket of an S3-compatible store.
type s3Store struct {
	client   *s3.Client
	bucket   string
	sse      types.ServerSideEncryption
	kmsKeyID string
	spoolDir string
}

func openS3(ctx context.Context, u *url.URL, dataDir string) (*s3Store, error) {
	o, err := parseS3URL(u)
	if err != nil {
		return nil, err
	}
	load := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				so.RateLimiter = ratelimit.None
				if o.rateLimit > 0 {
					so.RateLimiter = ratelimit.NewTokenRateLimit(o.rateLimit)
				}
			})
		}),
	}
	if o.region != "" {
		load = append(load, config.WithRegion(o.region))
	}
	if o.profile != "" {
		load = append(load, config.WithSharedConfigProfile(o.profile))
	}
	if o.anonymous {
		load = append(load, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	}
	if o.dualstack {
		load = append(load, config.WithUseDualStackEndpoint(aws.DualStackEndpointStateEnabled))
	}
	if o.fips {
		load = append(load, config.WithUseFIPSEndpoint(aws.FIPSEndpointStateEnabled))
	}
	if o.requestChecksumSet {
		load = append(load, config.WithRequestChecksumCalculation(o.requestChecksum))
	}
	if o.responseChecksumValidSet {
		load = append(load, config.WithResponseChecksumValidation(o.responseChecksum))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("no region: add region=… to the URL or set AWS_REGION")
	}
	if o.role != "" {
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), o.role))
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.endpoint != "" {
			so.BaseEndpoint = aws.String(o.endpoint)
		}
		so.UsePathStyle = o.pathStyle
		so.UseAccelerate = o.accelerate
		so.EndpointOptions.DisableHTTPS = o.disableHTTPS
	})
	// The data directory is where the operator gave room; a replica that
	// keeps nothing on disk (PostgreSQL, the secret key in the environment)
	// may not have one.
	spool := dataDir
	if fi, err := os.Stat(spool); spool == "" || err != nil || !fi.IsDir() {
		spool = os.TempDir()
	}
	return &s3Store{client: client, bucket: o.bucket, sse: o.sse, kmsKeyID: o.kmsKeyID, spoolDir: spool}, nil
}

func (s *s3Store) close() error { return nil }

// create gathers the object's bytes in a spool (memory, then an unlinked
// temporary file) and commit sends them in one PutObject. Why not stream
// them in a multipart upload: S3's parts are 5 MiB at least, so a stream
// would buffer as much anyway, and an upload a crash interrupts stays in
// the bucket as invisible parts, billed, that no listing shows and so no
// orphan sweep deletes. One PutObject makes the object appear whole or not
// at all, retries from the start of a seekable body, and objects are small
// (10 MiB a file by default, 25 MiB a message), far below PutObject's 5
// GiB. Nothing is sent before commit, so abort, or a crash, leaves nothing
// in the bucket, and the unlinked spool file nothing on disk.
func (s *s3Store) create(_ context.Context, key string) (objectWriter, error) {
	return &s3Writer{s: s, key: key, spool: spool{dir: s.spoolDir, limit: spoolMemory}}, nil
}

type s3Writer struct {
	s   *s3Store
	key string
	spool
}

func (w *s3Writer) commit(ctx context.Context) error {
	defer w.spool.close()
	body, err := w.spool.reader()
	if err != nil {
		return err
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(w.s.bucket),
		Key:           aws.String(w.key),
		Body:          body,
		ContentLength: aws.Int64(w.spool.size),
		// Never used (downloads are application/octet-stream); set so the
		// store does not guess one.
		ContentType: aws.String("application/octet-stream"),
	}
	if w.s.sse != "" {
		in.ServerSideEncryption = w.s.sse
	}
	if w.s.kmsKeyID != "" {
		in.SSEKMSKeyId = aws.String(w.s.kmsKeyID)
	}
	_, err = w.s.client.PutObject(ctx, in)
	return err
}

func (w *s3Writer) abort() { w.spool.close() }

func (s *s3Store) open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if length == 0 {
		// S3 has no empty range: check the object is there, read nothing.
		ok, err := s.exists(ctx, key)
		if err == nil && !ok {
			err = fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}
	switch {
	case length > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	case offset > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return nil, s3Error(err)
	}
	return out.Body, nil
}

func (s *s3Store) remove(ctx context.Context, key string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil && !errors.Is(s3Error(err), ErrNotFound) {
		return err
	}
	return nil
}

func (s *s3Store) exists(ctx context.Context, key string) (bool, error) {
	_, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err == nil {
		return true, nil
	}
	if errors.Is(s3Error(err), ErrNotFound) {
		return false, nil
	}
	return false, err
}

func (s *s3Store) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return keys, err
		}
		for _, obj := range page.Contents {
			keys = append(keys, aws.ToString(obj.Key))
		}
	}
	return keys, nil
}

// s3Error wraps ErrNotFound around the answers that say the object does
// not exist. A missing bucket is not among them: it is a configuration
// error (or a store not ready), and ErrNotFound would record every
// attachment read meanwhile as missing for good.
func s3Error(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return err
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// spoolMemory is how many bytes of an object being written to S3 wait in
// memory; a larger object moves to a temporary file. Most attachments fit,
// and memory stays bounded however many messages stream at once.
const spoolMemory = 1 << 20

// spool holds an object's bytes until they are sent: the first limit bytes
// in memory, all of them in a temporary file in dir past that. The file is
// unlinked as soon as it is created, so a crash leaves nothing to clean up.
type spool struct {
	dir    string
	limit  int
	buf    []byte
	f      *os.File
	linked bool // f still has a name to remove
	size   int64
	err    error // a failed write's: the spool no longer holds every byte
}

func (s *spool) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.f == nil && len(s.buf)+len(p) <= s.limit {
		s.buf = append(s.buf, p...)
		s.size += int64(len(p))
		return len(p), nil
	}
	if s.f == nil {
		f, err := os.CreateTemp(s.dir, ".agentowl-blob-*")
		if err != nil {
			s.err = err
			return 0, err
		}
		// Unlinked while open: the bytes stay reachable through f alone
		// and the kernel frees them when f closes, crash or not. (Where an
		// open file cannot be removed, close removes it.)
		s.f, s.linked = f, os.Remove(f.Name()) != nil
		if _, err := f.Write(s.buf); err != nil {
			s.close()
			s.err = err
			return 0, err
		}
		s.buf = nil
	}
	n, err := s.f.Write(p)
	s.size += int64(n)
	if err != nil {
		s.err = err
	}
	return n, err
}

// reader returns the bytes written: a seekable body, so the SDK knows its
// length and can rewind it to retry.
func (s *spool) reader() (io.ReadSeeker, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.f == nil {
		return bytes.NewReader(s.buf), nil
	}
	// A section reader, not the file: the SDK does not close it, and reads
	// do not move a shared offset.
	return io.NewSectionReader(s.f, 0, s.size), nil
}

func (s *spool) close() {
	if s.f != nil {
		s.f.Close()
		if s.linked {
			_ = os.Remove(s.f.Name())
		}
		s.f = nil
	}
	s.buf = nil
}

// checksumMode reads an option's when_supported or when_required as the
// SDK's setting of that name.
func checksumMode[T any](v string, supported, required T) (T, error) {
	switch strings.ToLower(v) {
	case "when_supported":
		return supported, nil
	case "when_required":
		return required, nil
	}
	var zero T
	return zero, errors.New("not when_supported or when_required")
}
