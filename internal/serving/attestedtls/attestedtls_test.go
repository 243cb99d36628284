package attestedtls_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/client/attested"
	"github.com/acds-project/acds/internal/serving/attestedtls"
	"github.com/acds-project/acds/verify"
)

// newClient returns an attested API client for base that opens a new TCP
// and TLS connection for every call, so every call is checked.
func newClient(t *testing.T, ch *attested.Checker, base string) *client.Client {
	t.Helper()
	c, err := ch.Client(base, &client.Options{HTTPClient: &http.Client{
		Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var versions = []struct {
	name string
	max  uint16
}{{"TLS1.3", 0}, {"TLS1.2", tls.VersionTLS12}}

func TestAcceptedForTheRightServer(t *testing.T) {
	h := getHarness(t)
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			ctx := context.Background()
			// Served as `acds serve --tls` does: attestedtls.Certificates.
			certs, err := attestedtls.NewCertificates(h.enclave, attestedtls.Options{})
			if err != nil {
				t.Fatal(err)
			}
			cfg := certs.TLSConfig()
			cfg.MaxVersion = v.max
			base, l := h.serveTLS(t, cfg)
			p := h.policy(t)
			ch := mustChecker(t, p, nil)
			c := newClient(t, ch, base)

			sess, err := c.Anon(ctx, "")
			if err != nil {
				t.Fatalf("anonymous session over attested TLS: %v", err)
			}
			c = c.WithToken(sess.Token)
			att, err := c.Attestation(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(att.TLSKey, h.cert.Leaf.RawSubjectPublicKeyInfo) {
				t.Fatal("GET /v1/attestation names another TLS key than the certificate's")
			}
			in := []byte(`{"resourceType":"Bundle","type":"collection"}`)
			acc, err := c.Process(ctx, acds.ProcessRequest{Data: in, OutputFormat: acds.OutputFHIRR4})
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			rec, err := c.Wait(wctx, acc.RequestID)
			if err != nil || rec.Status != acds.StatusCompleted {
				t.Fatalf("request: %+v %v", rec, err)
			}
			bundle, err := base64.StdEncoding.DecodeString(rec.Result.AttestationBundle)
			if err != nil {
				t.Fatal(err)
			}
			v, err := verify.New(p)
			if err != nil {
				t.Fatal(err)
			}
			res, err := v.VerifyOutput(bundle, rec.Result.Output)
			if err != nil || !res.Valid {
				t.Fatalf("the output's bundle under the same policy: %v %v", err, res.Reasons())
			}

			// One verification for the first connection; every later one,
			// each a new TCP and TLS connection, came from the cache.
			s := ch.Stats()
			if s.Verified != 1 || s.Refused != 0 || s.Cached < 3 || int64(s.Verified+s.Cached) != l.conns.Load() {
				t.Fatalf("stats %+v for %d connections: want 1 verification and the rest cached", s, l.conns.Load())
			}
			if l.appBytes.Load() == 0 {
				t.Fatal("the server read no request bytes: the counter the refusal tests rely on is broken")
			}
			r := ch.Result(h.cert.Leaf)
			if r == nil || r.Profile != attestation.ProfileSEVSNPSim || !bytes.Equal(r.Measurement, measurement) {
				t.Fatalf("the admitting result: %+v", r)
			}
		})
	}
}

// The certificate of another genuine enclave of the same build is
// accepted too: trust comes from the evidence, and both are genuine.
func TestAcceptedForAnotherGenuineEnclave(t *testing.T) {
	h := getHarness(t)
	cert, err := h.other.TLSCertificate(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := h.serve(t, cert, 0)
	ch := mustChecker(t, h.policy(t), nil)
	if _, err := newClient(t, ch, base).Health(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRefusedBeforeAnyRequestByte(t *testing.T) {
	h := getHarness(t)
	now := time.Now()
	genuine := attestation.BootEvidenceFromCertificate(h.cert.Leaf)
	tampered := bytes.Clone(genuine)
	tampered[len(tampered)/3] ^= 1 // inside the SNP report or its certificates
	impostor, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	noSim := h.policy(t)
	noSim.UnsafeAllowSimulation, noSim.SimulatedRoots = false, nil
	otherBuild := bytes.Clone(measurement)
	otherBuild[0] ^= 0xff

	for _, tc := range []struct {
		name   string
		cert   tls.Certificate
		policy verify.Policy
		check  verify.Check
		want   error
	}{
		{"evidence copied from another server", certificate(t, h.other.TLSSigner(), genuine, now.Add(-time.Hour), now.Add(time.Hour)),
			h.policy(t), verify.CheckBinding, verify.ErrTLSKeyNotBound},
		{"measurement outside the manifest", h.cert, h.policy(t, otherBuild), verify.CheckMeasurement, verify.ErrMeasurement},
		{"simulation without UnsafeAllowSimulation", h.cert, noSim, verify.CheckProfile, verify.ErrSimulation},
		{"tampered extension", certificate(t, h.enclave.TLSSigner(), tampered, now.Add(-time.Hour), now.Add(time.Hour)),
			h.policy(t), verify.CheckEvidence, verify.ErrEvidence},
		{"expired certificate", certificate(t, h.enclave.TLSSigner(), genuine, now.Add(-48*time.Hour), now.Add(-24*time.Hour)),
			h.policy(t), verify.CheckTime, verify.ErrCertificateTime},
		{"not yet valid certificate", certificate(t, h.enclave.TLSSigner(), genuine, now.Add(24*time.Hour), now.Add(48*time.Hour)),
			h.policy(t), verify.CheckTime, verify.ErrCertificateTime},
		{"plain TLS server", certificate(t, impostor, nil, now.Add(-time.Hour), now.Add(time.Hour)),
			h.policy(t), verify.CheckEvidence, verify.ErrNoEvidence},
	} {
		for _, v := range versions {
			t.Run(tc.name+"/"+v.name, func(t *testing.T) {
				base, l := h.serve(t, tc.cert, v.max)
				ch := mustChecker(t, tc.policy, nil)
				c := newClient(t, ch, base)
				before := h.requests.Load()

				_, err := c.Anon(context.Background(), "a passphrase that must not leave")
				var ce *verify.CertificateError
				if !errors.As(err, &ce) || !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want a *verify.CertificateError wrapping %v", err, tc.want)
				}
				var checks []verify.Check
				for _, f := range ce.Result.Failures {
					checks = append(checks, f.Check)
				}
				if !slices.Contains(checks, tc.check) {
					t.Fatalf("failed checks %v do not name %q", checks, tc.check)
				}
				if n := h.requests.Load() - before; n != 0 {
					t.Fatalf("%d requests reached the server handler", n)
				}
				if l.conns.Load() == 0 {
					t.Fatal("the client never connected: the refusal proves nothing")
				}
				if n := l.appBytes.Load(); n != 0 {
					t.Fatalf("the server read %d request bytes", n)
				}
				if s := ch.Stats(); s.Refused != 1 || s.Cached != 0 {
					t.Fatalf("stats %+v: want one refusal, nothing cached", s)
				}
				// A refusal is not cached as acceptance: the next try is
				// checked again and refused again (evidence that passed on
				// its own is a cache hit; what failed is checked again).
				if _, err := c.Health(context.Background()); !errors.Is(err, tc.want) {
					t.Fatalf("second try: %v", err)
				}
				if s := ch.Stats(); s.Refused != 2 || s.Verified+s.Cached > 2 || s.Cached > 1 {
					t.Fatalf("stats after a second try %+v", s)
				}
			})
		}
	}
}

// The cache is per evidence: a renewed certificate for the same key and
// evidence is a hit; the same evidence under another key is refused (the
// key binding); without a cache every connection verifies.
func TestCachePerCertificateKey(t *testing.T) {
	h := getHarness(t)
	ctx := context.Background()
	p := h.policy(t)
	ch := mustChecker(t, p, nil)
	base, _ := h.serve(t, h.cert, 0)
	c := newClient(t, ch, base)
	for range 3 {
		if _, err := c.Health(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := ch.Stats(); s.Verified != 1 || s.Cached != 2 {
		t.Fatalf("three connections to one enclave: %+v, want 1 verified, 2 cached", s)
	}

	renewed, err := h.enclave.TLSCertificate(2 * time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	base2, _ := h.serve(t, renewed, 0)
	if _, err := newClient(t, ch, base2).Health(ctx); err != nil {
		t.Fatal(err)
	}
	if s := ch.Stats(); s.Verified != 1 || s.Cached != 3 {
		t.Fatalf("a renewed certificate for the same key: %+v, want still 1 verified", s)
	}

	now := time.Now()
	copied := certificate(t, h.other.TLSSigner(), attestation.BootEvidenceFromCertificate(h.cert.Leaf), now.Add(-time.Hour), now.Add(time.Hour))
	base3, _ := h.serve(t, copied, 0)
	if _, err := newClient(t, ch, base3).Health(ctx); !errors.Is(err, verify.ErrTLSKeyNotBound) {
		t.Fatalf("copied evidence after the genuine one was cached: %v", err)
	}

	none := mustChecker(t, p, &attested.Options{CacheSize: -1})
	c = newClient(t, none, base)
	for range 2 {
		if _, err := c.Health(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := none.Stats(); s.Verified != 2 || s.Cached != 0 {
		t.Fatalf("without a cache: %+v", s)
	}
}

// A raw TLS connection with Checker.TLSConfig is checked the same way.
func TestTLSConfig(t *testing.T) {
	h := getHarness(t)
	base, _ := h.serve(t, h.cert, 0)
	ch := mustChecker(t, h.policy(t), nil)
	conn, err := tls.Dial("tcp", base[len("https://"):], ch.TLSConfig("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	p := h.policy(t)
	p.UnsafeAllowSimulation, p.SimulatedRoots = false, nil
	_, err = tls.Dial("tcp", base[len("https://"):], mustChecker(t, p, nil).TLSConfig("localhost"))
	if !errors.Is(err, verify.ErrSimulation) {
		t.Fatalf("raw TLS without UnsafeAllowSimulation: %v", err)
	}
}

// Concurrent first handshakes with one enclave wait for one verification.
func TestConcurrentFirstConnectionsVerifyOnce(t *testing.T) {
	h := getHarness(t)
	base, l := h.serve(t, h.cert, 0)
	ch := mustChecker(t, h.policy(t), nil)
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			c, err := tls.Dial("tcp", base[len("https://"):], ch.TLSConfig("localhost"))
			if err == nil {
				c.Close()
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if s := ch.Stats(); s.Verified != 1 || s.Cached != n-1 || l.conns.Load() != n {
		t.Fatalf("%d concurrent first connections: %+v over %d connections, want 1 verification", n, s, l.conns.Load())
	}
}

// The cache is bounded: with room for one key, alternating between two
// enclaves verifies every time.
func TestCacheBound(t *testing.T) {
	h := getHarness(t)
	other, err := h.other.TLSCertificate(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := h.serve(t, h.cert, 0)
	b, _ := h.serve(t, other, 0)
	ch := mustChecker(t, h.policy(t), &attested.Options{CacheSize: 1})
	for _, base := range []string{a, b, a, a} {
		c, err := tls.Dial("tcp", base[len("https://"):], ch.TLSConfig("localhost"))
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if s := ch.Stats(); s.Verified != 3 || s.Cached != 1 {
		t.Fatalf("A, B, A, A with room for one: %+v, want 3 verified, 1 cached", s)
	}
	if r := ch.Result(h.cert.Leaf); r == nil || !r.Valid {
		t.Fatal("no result for the cached enclave")
	}
	if s := ch.Stats(); s.Verified != 3 || s.Cached != 2 {
		t.Fatalf("Result of the last enclave: %+v, want a cache hit", s)
	}
}

// A cached acceptance does not outlive the manifest that allowed it.
func TestCachedAcceptanceEndsWithTheManifest(t *testing.T) {
	h := getHarness(t)
	base, l := h.serve(t, h.cert, 0)
	clk := &clock{t: time.Now()}
	p := h.policy(t) // the manifest is valid for 24 hours
	p.Now = clk.now
	ch := mustChecker(t, p, nil)
	c := newClient(t, ch, base)
	if _, err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.add(25 * time.Hour)
	before := h.requests.Load()
	bytesBefore := l.appBytes.Load()
	_, err := c.Health(context.Background())
	var ce *verify.CertificateError
	if !errors.As(err, &ce) || !errors.Is(err, verify.ErrManifest) || ce.Result.Failures[0].Check != verify.CheckManifest {
		t.Fatalf("after the manifest expired: %v", err)
	}
	if h.requests.Load() != before || l.appBytes.Load() != bytesBefore {
		t.Fatal("a request reached the server after the manifest expired")
	}
}
