package conformance

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The kit's own Standard Webhooks signing and verification, written from
// 7_async.md "Signing", independent of any implementation under test.

// newWebhookSecret returns a fresh whsec_ secret of 32 random bytes.
func newWebhookSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func secretKey(secret string) ([]byte, error) {
	if !strings.HasPrefix(secret, "whsec_") {
		return nil, errors.New("the signing secret does not start with whsec_")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) == 0 {
		return nil, errors.New("the signing secret is not base64 after whsec_")
	}
	return key, nil
}

// swSign is the v1 signature of id, ts and body under key.
func swSign(key []byte, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", id, ts)
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// swHeaders sets the three Standard Webhooks headers.
func swHeaders(h http.Header, key []byte, id string, ts time.Time, body []byte) {
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", swSign(key, id, ts.Unix(), body))
}

// swVerify checks a message's headers against its exact body bytes: all
// three headers, a timestamp within tolerance of now, and one valid v1
// signature among the space-separated ones.
func swVerify(key []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("missing a header: webhook-id %q, webhook-timestamp %q, webhook-signature %q", id, ts, sigs)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not Unix seconds", ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook-timestamp %s is %s away from the kit's clock", ts, d.Round(time.Second))
	}
	want := swSign(key, id, sec, body)
	for _, s := range strings.Fields(sigs) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("no valid v1 signature over the exact body in %q", sigs)
}
