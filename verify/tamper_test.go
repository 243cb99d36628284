package verify_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/verify"
	"github.com/fxamacker/cbor/v2"
)

var detEnc, _ = cbor.CoreDetEncOptions().EncMode()

// mutateBundle decodes b generically, lets f change the top-level map and
// re-encodes it deterministically.
func mutateBundle(t *testing.T, b []byte, f func(m map[int][]byte, raw map[int]any)) []byte {
	t.Helper()
	var raw map[int]any
	if err := cbor.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	bs := map[int][]byte{}
	for k, v := range raw {
		if x, ok := v.([]byte); ok {
			bs[k] = bytes.Clone(x)
		}
	}
	f(bs, raw)
	for k, v := range bs {
		raw[k] = v
	}
	out, err := detEnc.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mutateEvidence(t *testing.T, ev []byte, key int, f func([]byte)) []byte {
	t.Helper()
	var m map[int][]byte
	if err := cbor.Unmarshal(ev, &m); err != nil {
		t.Fatal(err)
	}
	f(m[key])
	out, err := detEnc.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func freshSPKI(t *testing.T) []byte {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	return der
}

// Every field of a bundle, changed in turn, makes it invalid, with the flag
// of the check that field feeds false.
func TestTamperEveryField(t *testing.T) {
	f := getFixture(t)
	out := []byte("output")
	mpc := f.mpcBundle(t, out)
	p := f.policy()
	if res, _ := mustNew(t, p).VerifyOutput(mpc, out); !res.Valid {
		t.Fatalf("baseline: %v", res.Err())
	}
	// Bundle keys: 1 version, 2 profile, 3 evidence, 4 signing key, 5 TLS
	// key, 6 boot nonce, 7 statement, 8 notary statements. Evidence keys:
	// 1 report, 2 VCEK, 3 ASK, 4 ARK.
	type flag int
	const (
		parseErr flag = iota
		tee
		mpcFlag
		hash
	)
	flip := func(i int) func([]byte) { return func(b []byte) { b[i%len(b)] ^= 0x01 } }
	cases := []struct {
		name  string
		edit  func(m map[int][]byte, raw map[int]any)
		false flag
	}{
		{"version", func(m map[int][]byte, raw map[int]any) { raw[1] = 3 }, parseErr},
		{"profile to sev-snp", func(m map[int][]byte, raw map[int]any) { raw[2] = "sev-snp" }, tee},
		{"profile to tdx", func(m map[int][]byte, raw map[int]any) { raw[2] = "tdx" }, tee},
		{"report data", func(m map[int][]byte, _ map[int]any) { m[3] = mutateEvidence(t, m[3], 1, flip(0x50)) }, tee},
		{"report measurement", func(m map[int][]byte, _ map[int]any) { m[3] = mutateEvidence(t, m[3], 1, flip(0x90)) }, tee},
		{"report policy (debug)", func(m map[int][]byte, _ map[int]any) {
			m[3] = mutateEvidence(t, m[3], 1, func(b []byte) { b[0x0A] |= 0x08 })
		}, tee},
		{"report signature", func(m map[int][]byte, _ map[int]any) { m[3] = mutateEvidence(t, m[3], 1, flip(0x2A0+7)) }, tee},
		{"vcek certificate", func(m map[int][]byte, _ map[int]any) { m[3] = mutateEvidence(t, m[3], 2, flip(-20+1<<20)) }, tee},
		{"vcek certificate body", func(m map[int][]byte, _ map[int]any) { m[3] = mutateEvidence(t, m[3], 2, flip(200)) }, tee},
		{"ask certificate", func(m map[int][]byte, _ map[int]any) { m[3] = mutateEvidence(t, m[3], 3, flip(300)) }, tee},
		{"ark certificate", func(m map[int][]byte, _ map[int]any) { m[3] = mutateEvidence(t, m[3], 4, flip(300)) }, tee},
		{"signing key replaced", func(m map[int][]byte, _ map[int]any) { m[4] = freshSPKI(t) }, tee},
		{"tls key added", func(m map[int][]byte, _ map[int]any) { m[5] = freshSPKI(t) }, tee},
		{"boot nonce", func(m map[int][]byte, _ map[int]any) { flip(5)(m[6]) }, tee},
		{"statement signature", func(m map[int][]byte, _ map[int]any) { flip(len(m[7]) - 2)(m[7]) }, tee},
		{"statement claims", func(m map[int][]byte, _ map[int]any) {
			i := bytes.Index(m[7], []byte("req-mpc-1"))
			m[7][i] = 'X'
		}, tee},
		{"notary statement", func(m map[int][]byte, raw map[int]any) {
			stmts := raw[8].([]any)
			s := bytes.Clone(stmts[0].([]byte))
			s[len(s)-3] ^= 1
			raw[8] = []any{s}
		}, mpcFlag},
		{"notary statement removed", func(m map[int][]byte, raw map[int]any) { delete(raw, 8) }, mpcFlag},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := mutateBundle(t, mpc, tc.edit)
			res, err := mustNew(t, p).VerifyOutput(b, out)
			if tc.false == parseErr {
				if err == nil {
					t.Fatalf("parsed: %+v", res)
				}
				return
			}
			if err != nil {
				// Structure-level rejection is also a refusal.
				t.Logf("rejected at parse: %v", err)
				return
			}
			if res.Valid {
				t.Fatal("tampered bundle is valid")
			}
			switch tc.false {
			case tee:
				if res.TEEQuoteVerified {
					t.Fatalf("teeQuoteVerified still true: %v", res.Err())
				}
			case mpcFlag:
				if res.MPCTLSVerified || !res.TEEQuoteVerified {
					t.Fatalf("flags tee=%v mpc=%v: %v", res.TEEQuoteVerified, res.MPCTLSVerified, res.Err())
				}
			}
			t.Logf("reasons: %v", res.Reasons())
		})
	}
}

func TestBadInputNeverVerifies(t *testing.T) {
	f := getFixture(t)
	b := f.rawBundle(t, []byte("x"))
	v := mustNew(t, f.policy())
	inputs := map[string][]byte{
		"empty":     nil,
		"truncated": b[:len(b)/2],
		"trailing":  append(bytes.Clone(b), 0x00),
		"oversized": bytes.Repeat([]byte{0xa0}, attestation.MaxBundleSize+1),
		"random":    []byte("\x8a\x01\x02 random bytes"),
		"wrong type": func() []byte {
			x, _ := detEnc.Marshal([]string{"not", "a", "map"})
			return x
		}(),
	}
	for i := 1; i < len(b); i += 97 {
		inputs["prefix"+strconv.Itoa(i)] = b[:i]
	}
	for name, in := range inputs {
		res, err := v.Verify(in)
		if err == nil && res.Valid {
			t.Errorf("%s: verified", name)
		}
	}
	if _, err := v.Verify(inputs["oversized"]); !errors.Is(err, attestation.ErrTooLarge) {
		t.Errorf("oversized: %v", err)
	}
}

// failingTransport fails (and counts) every request.
type failingTransport struct{ calls atomic.Int32 }

func (f *failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	f.calls.Add(1)
	return nil, errors.New("network access during verification")
}

// Verification never touches the network: with every HTTP request and every
// dial failing, real hardware evidence and simulated bundles still verify
// (or fail for their own reasons), and nothing was attempted.
func TestVerificationNeverDials(t *testing.T) {
	f := getFixture(t)
	tr := &failingTransport{}
	var dials atomic.Int32
	origTransport, origResolver := http.DefaultTransport, net.DefaultResolver
	http.DefaultTransport = tr
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		dials.Add(1)
		return nil, errors.New("dial refused")
	}}
	defer func() { http.DefaultTransport, net.DefaultResolver = origTransport, origResolver }()

	// A simulated bundle.
	out := []byte("o")
	res, err := mustNew(t, f.policy()).VerifyOutput(f.mpcBundle(t, out), out)
	if err != nil || !res.Valid {
		t.Fatalf("simulated bundle: %v %v", err, res.Err())
	}
	// Real hardware evidence (binding fails: it was not made for these keys,
	// but the AMD chain and signature are checked offline).
	parsed, _ := attestation.ParseBundle(f.rawBundle(t, out))
	ev := milanEvidence(t)
	parsed.Boot.Profile = attestation.ProfileSEVSNP
	parsed.Boot.Evidence, _ = ev.Marshal()
	hw, err := parsed.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p := f.policy()
	p.UnsafeAllowDebug = true
	p.Now = func() time.Time { return time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC) }
	res, err = mustNew(t, p).Verify(hw)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res.Err(), verify.ErrBinding) {
		t.Fatalf("hardware evidence: want only a binding failure, got %v", res.Err())
	}
	if n := tr.calls.Load() + dials.Load(); n != 0 {
		t.Fatalf("verification attempted %d network operations", n)
	}
}

// With the bundle's own simulated root trusted (acds verify
// --allow-simulated without a pinned root), a bundle whose carried root
// was altered where nothing checks it (a bit of its self-signature) may
// still verify — any simulated installation can make valid evidence — but
// the result then says so, naming the root it rested on, which differs
// from the genuine root's.
func TestCarriedRootSaysWhatItRestsOn(t *testing.T) {
	f := getFixture(t)
	out := []byte("output")
	b := f.rawBundle(t, out)
	p := f.policy()
	if !p.UnsafeTrustBundleSimulatedRoot {
		t.Fatal("the fixture's policy does not trust the carried root")
	}
	genuine, err := mustNew(t, p).VerifyOutput(b, out)
	if err != nil || !genuine.Valid {
		t.Fatalf("baseline: %v %v", err, genuine.Err())
	}
	rootNote := func(res *verify.Result) string {
		for _, r := range res.Relaxations {
			if strings.Contains(r, "simulated root the evidence carries") {
				return r
			}
		}
		return ""
	}
	note := rootNote(genuine)
	if !strings.Contains(note, "any simulated installation") || !strings.Contains(note, "any measurement") ||
		!strings.Contains(note, "UnsafeTrustBundleSimulatedRoot") {
		t.Fatalf("the carried-root relaxation does not say what it rests on: %q", note)
	}
	// The last byte of the ARK certificate is in its signature.
	altered := mutateBundle(t, b, func(m map[int][]byte, _ map[int]any) {
		m[3] = mutateEvidence(t, m[3], 4, func(c []byte) { c[len(c)-1] ^= 0x01 })
	})
	res, err := mustNew(t, p).VerifyOutput(altered, out)
	if err != nil || !res.Valid {
		t.Logf("the altered root is refused: %v %v", err, res.Err())
		return
	}
	if got := rootNote(res); got == "" || got == note {
		t.Fatalf("an altered carried root verified without naming the root it rested on: %q (genuine %q)", got, note)
	}
}
