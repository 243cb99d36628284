package servertest

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
)

// Pipeline is a fake server.Pipeline: the output is the compacted input
// JSON and its SHA-256. Input that is not a JSON object with a string
// "resourceType" is invalid FHIR (with an OperationOutcome). Hook, when
// set, runs first on every call (tests block, fail or panic there).
type Pipeline struct {
	Hook func(ctx context.Context, input []byte) error
}

var (
	_ server.Pipeline = (*Pipeline)(nil)
	_ server.Checker  = (*Pipeline)(nil)
)

// Check implements server.Checker with the same rule as Process.
func (p *Pipeline) Check(ctx context.Context, input []byte, format string) error {
	var v struct {
		ResourceType any `json:"resourceType"`
	}
	if err := json.Unmarshal(input, &v); err != nil {
		return invalid("the input is not a JSON object: " + err.Error())
	}
	if s, ok := v.ResourceType.(string); !ok || s == "" {
		return invalid("resourceType is missing")
	}
	return nil
}

func invalid(msg string) error {
	return &fhir.InvalidError{Outcome: &fhir.OperationOutcome{Issues: []fhir.Issue{{Severity: fhir.SeverityError, Code: "structure", Diagnostics: msg}}}}
}

// Process implements server.Pipeline.
func (p *Pipeline) Process(ctx context.Context, input []byte, opts fhir.Options) (*fhir.Output, error) {
	if p.Hook != nil {
		if err := p.Hook(ctx, input); err != nil {
			return nil, err
		}
	}
	if err := p.Check(ctx, input, opts.Format); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, input); err != nil {
		return nil, err
	}
	h := sha256.Sum256(buf.Bytes())
	return &fhir.Output{Format: opts.Format, JSON: buf.Bytes(), Digest: "sha256:" + hex.EncodeToString(h[:])}, nil
}

// Enclave is a fake server.Enclave with a real per-instance P-256 signing
// key and AES-256-GCM sealing key. Its "bundle" is JSON of the claims with
// an ECDSA signature; it proves nothing about hardware.
type Enclave struct {
	key  *ecdsa.PrivateKey
	aead cipher.AEAD
	// AttestHook, when set, runs first in Attest.
	AttestHook func(ctx context.Context, c attestation.Claims) error
}

// NewEnclave returns a fake enclave with fresh keys.
func NewEnclave() *Enclave {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err) // crypto/rand failing is unrecoverable
	}
	var sk [32]byte
	_, _ = rand.Read(sk[:])
	b, _ := aes.NewCipher(sk[:])
	g, _ := cipher.NewGCM(b)
	return &Enclave{key: k, aead: g}
}

var _ server.Enclave = (*Enclave)(nil)

// FakeProfile is the profile the fake enclave reports.
const FakeProfile = "fake"

// Profile implements server.Enclave.
func (e *Enclave) Profile() string { return FakeProfile }

// Measurement implements server.Enclave: SHA-384 of "servertest".
func (e *Enclave) Measurement() string {
	h := sha512.Sum384([]byte("servertest"))
	return hex.EncodeToString(h[:])
}

// FakeBundle is the fake attestation bundle.
type FakeBundle struct {
	Claims           attestation.Claims `json:"claims"`
	NotaryStatements [][]byte           `json:"notaryStatements,omitempty"`
	Signature        []byte             `json:"signature"`
	Key              []byte             `json:"key"`
}

// Attest implements server.Enclave.
func (e *Enclave) Attest(ctx context.Context, c attestation.Claims, notaryStatements [][]byte) ([]byte, error) {
	if e.AttestHook != nil {
		if err := e.AttestHook(ctx, c); err != nil {
			return nil, err
		}
	}
	msg, _ := json.Marshal(c)
	h := sha256.Sum256(msg)
	sig, err := ecdsa.SignASN1(rand.Reader, e.key, h[:])
	if err != nil {
		return nil, err
	}
	spki, _ := x509.MarshalPKIXPublicKey(&e.key.PublicKey)
	return json.Marshal(FakeBundle{Claims: c, NotaryStatements: notaryStatements, Signature: sig, Key: spki})
}

// Seal implements server.Enclave.
func (e *Enclave) Seal(plaintext, ad []byte) ([]byte, error) {
	nonce := make([]byte, e.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return e.aead.Seal(nonce, nonce, plaintext, ad), nil
}

// Unseal implements server.Enclave.
func (e *Enclave) Unseal(sealed, ad []byte) ([]byte, error) {
	n := e.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed data too short")
	}
	return e.aead.Open(nil, sealed[:n], sealed[n:], ad)
}

// BootEvidence implements server.Enclave.
func (e *Enclave) BootEvidence() acds.Attestation {
	spki, _ := x509.MarshalPKIXPublicKey(&e.key.PublicKey)
	return acds.Attestation{
		Profile: FakeProfile, Measurement: e.Measurement(),
		Evidence: []byte("fake evidence"), Certificates: [][]byte{}, SigningKey: spki, BootNonce: make([]byte, 32),
	}
}

// Verifier is a fake server.Verifier for FakeBundle bundles: it checks the
// ECDSA signature against the bundle's own key (no trust anchor: a fake).
type Verifier struct{}

var _ server.Verifier = Verifier{}

// Verify implements server.Verifier.
func (Verifier) Verify(ctx context.Context, bundle, output []byte) (*acds.VerifyResponse, error) {
	var fb FakeBundle
	dec := json.NewDecoder(bytes.NewReader(bundle))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fb); err != nil || len(fb.Key) == 0 {
		return nil, fmt.Errorf("%w: not a fake bundle", server.ErrMalformedBundle)
	}
	res := &acds.VerifyResponse{Details: acds.VerifyDetails{
		Profile: FakeProfile, RequestID: fb.Claims.RequestID, OutputDigest: fb.Claims.OutputDigest,
		Source: fb.Claims.Source.Kind, IssuedAt: fb.Claims.IssuedAt, Reasons: []string{},
	}}
	if len(fb.Claims.Source.Sessions) > 0 {
		res.Details.PortalHost = fb.Claims.Source.Sessions[0].Host
	}
	pk, err := x509.ParsePKIXPublicKey(fb.Key)
	ek, ok := pk.(*ecdsa.PublicKey)
	if err != nil || !ok {
		return nil, fmt.Errorf("%w: bad key", server.ErrMalformedBundle)
	}
	msg, _ := json.Marshal(fb.Claims)
	h := sha256.Sum256(msg)
	sigOK := ecdsa.VerifyASN1(ek, h[:], fb.Signature)
	res.TEEQuoteVerified = false
	res.Details.Reasons = append(res.Details.Reasons, "fake enclave: no hardware evidence")
	res.EnclaveHashMatch = sigOK
	if !sigOK {
		res.Details.Reasons = append(res.Details.Reasons, "signature does not verify")
	}
	if output != nil {
		d := sha256.Sum256(output)
		if "sha256:"+hex.EncodeToString(d[:]) != fb.Claims.OutputDigest {
			res.EnclaveHashMatch = false
			res.Details.Reasons = append(res.Details.Reasons, "output digest does not match")
		}
	}
	res.Valid = false // a fake is never valid
	return res, nil
}

// Fetcher is a fake server.Fetcher returning FHIR, or Err. It remembers
// the credentials of the last call so tests can check they arrived.
type Fetcher struct {
	FHIR []byte
	Err  error
	// AdmitFunc is the acceptance rule Admit applies. Nil admits every
	// request: the fake has no portal rules of its own (the real ones are
	// package portal's, wired by package service).
	AdmitFunc func(portal.Request) error

	mu   sync.Mutex
	last portal.Credentials
}

var _ server.Fetcher = (*Fetcher)(nil)

// Admit implements server.Fetcher: it returns AdmitFunc's decision, or
// nil (admitted) when AdmitFunc is nil.
func (f *Fetcher) Admit(r portal.Request) error {
	if f.AdmitFunc != nil {
		return f.AdmitFunc(r)
	}
	return nil
}

// Fetch implements server.Fetcher.
func (f *Fetcher) Fetch(ctx context.Context, r portal.Request) (*portal.Result, error) {
	f.mu.Lock()
	f.last = r.Credentials
	f.mu.Unlock()
	if f.Err != nil {
		return nil, f.Err
	}
	line := "GET /fhir/Patient/" + r.RecordID + "/$everything HTTP/1.1"
	return &portal.Result{
		FHIR: f.FHIR, Host: "portal.example", RequestLines: []string{line},
		Sessions: []portal.Session{{Host: "portal.example", Statement: []byte("statement"), RequestLines: []string{line}}},
		Coverage: &acds.Coverage{Everything: true, Requests: []acds.CoverageRequest{{RequestLine: line, Status: 200, Pages: 1, Entries: 1}}},
	}, nil
}

// LastCredentials returns the credentials of the last Fetch.
func (f *Fetcher) LastCredentials() portal.Credentials {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// Clock is a settable clock for Config.Now, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
