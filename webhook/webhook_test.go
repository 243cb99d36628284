package webhook_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/verify"
	"github.com/acds-project/acds/webhook"
)

func enclave(t *testing.T) (*attestation.Enclave, *verify.Verifier) {
	t.Helper()
	b, err := sim.NewBackend(filepath.Join(t.TempDir(), "enclave"), sim.Options{RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	e, err := attestation.New(context.Background(), b, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := verify.TrustEnclave(verify.Policy{}, e.BootEvidence(), e.Measurement())
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return e, v
}

func sign(t *testing.T, e *attestation.Enclave, body []byte) string {
	t.Helper()
	sig, err := webhook.Sign(e.SignJWS, e.BootEvidence().SigningKey, body)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func TestSignVerify(t *testing.T) {
	e, v := enclave(t)
	other, otherV := enclave(t)
	body, _ := json.Marshal(webhook.Payload{RequestID: "9e85a9ee-330a-499c-9bb8-cad151b07bf5", Status: acds.StatusCompleted, OutputDigest: "sha256:00"})
	sig := sign(t, e, body)
	if parts := strings.Split(sig, "."); len(parts) != 3 || parts[1] != "" {
		t.Fatalf("not a detached compact JWS: %q", sig)
	}
	p, res, err := webhook.Verify(v, e.MarshalBootEvidence(), sig, body)
	if err != nil || p.Status != acds.StatusCompleted || !res.Valid {
		t.Fatalf("genuine delivery: %v", err)
	}

	tampered := []byte(strings.Replace(string(body), "completed", "failed", 1))
	noneHdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`))
	hsHdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256"}`))
	for name, c := range map[string]struct {
		v         *verify.Verifier
		boot      []byte
		sig       string
		body      []byte
		wantClass error
	}{
		"tampered body":          {v, e.MarshalBootEvidence(), sig, tampered, webhook.ErrSignature},
		"another enclave's sig":  {v, e.MarshalBootEvidence(), sign(t, other, body), body, webhook.ErrSignature},
		"another enclave's boot": {otherV, other.MarshalBootEvidence(), sig, body, webhook.ErrSignature},
		"untrusted enclave":      {v, other.MarshalBootEvidence(), sign(t, other, body), body, webhook.ErrEnclave},
		"not boot evidence":      {v, []byte("junk"), sig, body, webhook.ErrEnclave},
		"alg none":               {v, e.MarshalBootEvidence(), noneHdr + "..", body, webhook.ErrSignature},
		"alg HS256":              {v, e.MarshalBootEvidence(), hsHdr + "..AAAA", body, webhook.ErrSignature},
		"no signature":           {v, e.MarshalBootEvidence(), "", body, webhook.ErrSignature},
		"not a payload":          {v, e.MarshalBootEvidence(), sign(t, e, []byte(`{"requestId":"x","status":"processing"}`)), []byte(`{"requestId":"x","status":"processing"}`), webhook.ErrPayload},
		"unknown field":          {v, e.MarshalBootEvidence(), sign(t, e, []byte(`{"requestId":"x","status":"failed","x":1}`)), []byte(`{"requestId":"x","status":"failed","x":1}`), webhook.ErrPayload},
	} {
		if _, _, err := webhook.Verify(c.v, c.boot, c.sig, c.body); !errors.Is(err, c.wantClass) {
			t.Errorf("%s: %v, want %v", name, err, c.wantClass)
		}
	}
}

// TestSignJWSOnlySignsJWSInput: the boot key signs only base64url text
// with one dot, never something shaped like a claims Sig_structure.
func TestSignJWSOnlySignsJWSInput(t *testing.T) {
	e, _ := enclave(t)
	for _, in := range []string{"\x84\x6aSignature1", "abc", "a.b.c", "a b.c", "", "."} {
		if _, err := e.SignJWS([]byte(in)); !errors.Is(err, attestation.ErrNotJWSInput) {
			t.Errorf("SignJWS(%q): %v", in, err)
		}
	}
	if sig, err := e.SignJWS([]byte("eyJ.e30")); err != nil || len(sig) != 64 {
		t.Fatalf("a signing input: %d bytes, %v", len(sig), err)
	}
}

// FuzzVerify: whatever the signature header and body, Verify returns a
// typed error or a payload, never panics; only the genuine pair passes.
func FuzzVerify(f *testing.F) {
	dir := f.TempDir()
	b, err := sim.NewBackend(filepath.Join(dir, "enclave"), sim.Options{RSABits: 2048})
	if err != nil {
		f.Fatal(err)
	}
	e, err := attestation.New(context.Background(), b, attestation.Options{})
	if err != nil {
		f.Fatal(err)
	}
	p, err := verify.TrustEnclave(verify.Policy{}, e.BootEvidence(), e.Measurement())
	if err != nil {
		f.Fatal(err)
	}
	v, err := verify.New(p)
	if err != nil {
		f.Fatal(err)
	}
	body := []byte(`{"requestId":"r","status":"completed","outputDigest":"sha256:00"}`)
	sig, err := webhook.Sign(e.SignJWS, e.BootEvidence().SigningKey, body)
	if err != nil {
		f.Fatal(err)
	}
	boot := e.MarshalBootEvidence()
	f.Add(sig, body)
	f.Add(sig[:len(sig)-3], body)
	f.Add("eyJhbGciOiJub25lIn0..", body)
	f.Add(sig, []byte(`{"requestId":"r","status":"failed"}`))
	f.Fuzz(func(t *testing.T, s string, bd []byte) {
		pl, _, err := webhook.Verify(v, boot, s, bd)
		if err == nil && (!sameJWS(s, sig) || string(bd) != string(body)) {
			// ECDSA signatures are not unique, but only the holder of the
			// key can make another: a fuzzer cannot. (Base64 with other
			// unused trailing bits decodes to the same signature.)
			t.Fatalf("accepted a forged delivery: %q %q", s, bd)
		}
		if err != nil && pl != nil {
			t.Fatal("a payload with an error")
		}
		if err != nil && !errors.Is(err, webhook.ErrSignature) && !errors.Is(err, webhook.ErrPayload) && !errors.Is(err, webhook.ErrEnclave) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

// sameJWS reports whether two detached compact JWS decode to the same
// header and signature bytes.
func sameJWS(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	if len(pa) != 3 || len(pb) != 3 || pa[1] != "" || pb[1] != "" {
		return false
	}
	for _, i := range []int{0, 2} {
		x, err1 := base64.RawURLEncoding.DecodeString(pa[i])
		y, err2 := base64.RawURLEncoding.DecodeString(pb[i])
		if err1 != nil || err2 != nil || string(x) != string(y) {
			return false
		}
	}
	return true
}
