package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentowl/agentowl/webhook"
)

// The AAP seed's example notification and its published signature.
const (
	seedSecret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	seedID     = "f4b96ac4-404d-4f6a-9a03-a0565edc4922"
	seedBody   = "{\n  \"id\": \"f4b96ac4-404d-4f6a-9a03-a0565edc4922\",\n  \"type\": \"request.resolved\",\n  \"instance_id\": \"b29a43a7-1949-4b9f-9d61-b7ae66f85d31\",\n  \"request_id\": \"7ab8c8ec-7b2d-4fd6-9b52-752f9515eb71\",\n  \"created_at\": \"2026-09-16T12:02:00Z\"\n}"
	seedSig    = "v1,zgT2qt+QiEEonu9tmZqEuKzoa83SGE9ZcCgUHzqSPZ8="
)

var seedTime = time.Unix(1789560121, 0)

func TestSignReproducesSeedExample(t *testing.T) {
	key, err := webhook.ParseSecret(seedSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := key.Sign(seedID, seedTime, []byte(seedBody)); got != seedSig {
		t.Fatalf("signature = %s, want %s", got, seedSig)
	}
}

func TestSignaturesVerifyWithReferenceLibrary(t *testing.T) {
	secret := webhook.NewSecret()
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"x","type":"request.resolved"}`)
	h := http.Header{}
	key.SetHeaders(h, "msg_1", time.Now(), body)
	if err := ref.Verify(body, h); err != nil {
		t.Fatalf("reference library rejects our signature: %v", err)
	}
	// And ours accepts the reference library's.
	sig, err := ref.Sign("msg_2", time.Now(), body)
	if err != nil {
		t.Fatal(err)
	}
	h2 := http.Header{}
	h2.Set(webhook.HeaderID, "msg_2")
	h2.Set(webhook.HeaderTimestamp, h.Get(webhook.HeaderTimestamp))
	h2.Set(webhook.HeaderSignature, sig)
	if _, err := key.Verify(h2, body, time.Now(), webhook.DefaultTolerance); err != nil {
		t.Fatalf("we reject the reference library's signature: %v", err)
	}
}

func TestVerify(t *testing.T) {
	key, _ := webhook.ParseSecret(seedSecret)
	other, _ := webhook.ParseSecret(webhook.NewSecret())
	body := []byte(seedBody)
	headers := func(mut func(h http.Header)) http.Header {
		h := http.Header{}
		key.SetHeaders(h, seedID, seedTime, body)
		if mut != nil {
			mut(h)
		}
		return h
	}
	otherSig := other.Sign(seedID, seedTime, body)
	cases := []struct {
		name string
		h    http.Header
		body []byte
		now  time.Time
		want error
	}{
		{"valid", headers(nil), body, seedTime, nil},
		{"valid at +5m", headers(nil), body, seedTime.Add(5 * time.Minute), nil},
		{"valid among several signatures", headers(func(h http.Header) { h.Set(webhook.HeaderSignature, otherSig+" "+seedSig) }), body, seedTime, nil},
		{"late", headers(nil), body, seedTime.Add(5*time.Minute + time.Second), webhook.ErrTimestampSkew},
		{"early", headers(nil), body, seedTime.Add(-6 * time.Minute), webhook.ErrTimestampSkew},
		{"body changed", headers(nil), append([]byte(seedBody), ' '), seedTime, webhook.ErrNoValidSignature},
		{"other key", headers(func(h http.Header) { h.Set(webhook.HeaderSignature, otherSig) }), body, seedTime, webhook.ErrNoValidSignature},
		{"v2 only", headers(func(h http.Header) { h.Set(webhook.HeaderSignature, "v2"+seedSig[2:]) }), body, seedTime, webhook.ErrNoValidSignature},
		{"id changed", headers(func(h http.Header) { h.Set(webhook.HeaderID, "other") }), body, seedTime, webhook.ErrNoValidSignature},
		{"no id", headers(func(h http.Header) { h.Del(webhook.HeaderID) }), body, seedTime, webhook.ErrMissingHeaders},
		{"no signature", headers(func(h http.Header) { h.Del(webhook.HeaderSignature) }), body, seedTime, webhook.ErrMissingHeaders},
		{"bad timestamp", headers(func(h http.Header) { h.Set(webhook.HeaderTimestamp, "12:00") }), body, seedTime, webhook.ErrInvalidTimestamp},
		// Other spellings of the same second, each validly signed over its
		// own text: only plain decimal digits are a timestamp.
		{"timestamp with a plus sign", signedAs(key, "+"+seedTS, body), body, seedTime, webhook.ErrInvalidTimestamp},
		{"timestamp with a leading zero", signedAs(key, "0"+seedTS, body), body, seedTime, webhook.ErrInvalidTimestamp},
		{"timestamp with a space", signedAs(key, " "+seedTS, body), body, seedTime, webhook.ErrInvalidTimestamp},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := key.Verify(c.h, c.body, c.now, webhook.DefaultTolerance)
			if !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}

func TestParseSecret(t *testing.T) {
	for _, s := range []string{"", "whsec_", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "whsec_!!!!", "whsec_AAEC"} {
		if _, err := webhook.ParseSecret(s); !errors.Is(err, webhook.ErrInvalidSecret) {
			t.Errorf("ParseSecret(%q) = %v, want ErrInvalidSecret", s, err)
		}
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(seedID, "1789560121", seedSig, []byte(seedBody))
	f.Add("", "", "", []byte{})
	f.Add("id", "-1", "v1,", []byte("x"))
	f.Add("id", "99999999999999999999", "v1,@@@ v1", []byte("{}"))
	key, _ := webhook.ParseSecret(seedSecret)
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set(webhook.HeaderID, id)
		h.Set(webhook.HeaderTimestamp, ts)
		h.Set(webhook.HeaderSignature, sig)
		gotID, err := key.Verify(h, body, seedTime, webhook.DefaultTolerance)
		if err != nil {
			return
		}
		sec, perr := strconv.ParseInt(ts, 10, 64)
		if perr != nil || gotID != id || !strings.Contains(sig, key.Sign(id, time.Unix(sec, 0), body)[3:]) {
			t.Fatalf("accepted a message without its valid signature: id=%q ts=%q sig=%q", id, ts, sig)
		}
	})
}

// seedTS is seedTime as the webhook-timestamp header writes it.
var seedTS = strconv.FormatInt(seedTime.Unix(), 10)

// signedAs returns the headers of the seed message with webhook-timestamp
// ts, signed over that exact text (as a sender writing it that way would).
func signedAs(key webhook.Key, ts string, body []byte) http.Header {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(seedID + "." + ts + "."))
	mac.Write(body)
	h := http.Header{}
	h.Set(webhook.HeaderID, seedID)
	h.Set(webhook.HeaderTimestamp, ts)
	h.Set(webhook.HeaderSignature, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return h
}
