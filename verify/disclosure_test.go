package verify_test

import (
	"bytes"
	"context"
	"crypto/sha512"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/disclosure"
	"github.com/acds-project/acds/verify"
)

// v1Policy trusts the committed version 1 golden bundle: made by a
// simulated enclave measuring SHA-384("acds v1 golden bundle") at
// 2026-11-26T11:30:00Z, before version 2 existed.
func v1Policy() verify.Policy {
	m := sha512.Sum384([]byte("acds v1 golden bundle"))
	return verify.Policy{
		UnsafeAllowSimulation:          true,
		UnsafeTrustBundleSimulatedRoot: true,
		Measurements:                   map[string][][]byte{attestation.ProfileSEVSNPSim: {m[:]}},
		Now:                            func() time.Time { return time.Date(2026, 11, 26, 11, 31, 0, 0, time.UTC) },
	}
}

func TestVersion1BundleStillVerifies(t *testing.T) {
	bundle, err := os.ReadFile("testdata/v1-bundle.cbor")
	if err != nil {
		t.Fatal(err)
	}
	output, err := os.ReadFile("testdata/v1-output.json")
	if err != nil {
		t.Fatal(err)
	}
	v := mustNew(t, v1Policy())
	r, err := v.VerifyOutput(bundle, output)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Valid || r.BundleVersion != 1 || r.Claims.Entries != nil {
		t.Fatalf("valid %v, version %d, reasons %v", r.Valid, r.BundleVersion, r.Reasons())
	}
	if d := r.Response().Details; d.BundleVersion != 1 || d.Entries != nil {
		t.Errorf("details: %+v", d)
	}
	// Its output is a Bundle, but nothing commits to its entries: a
	// disclosure made from it fails with a reason, never passes.
	d, err := disclosure.New(bundle, bytes.Repeat([]byte{1}, 32), output, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := d.Marshal()
	r, err = v.VerifyDisclosure(b)
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid || !hasFailure(r, verify.ErrDisclosure) {
		t.Fatalf("disclosure of a v1 bundle: valid %v, %v", r.Valid, r.Reasons())
	}
}

func hasFailure(r *verify.Result, class error) bool {
	for _, f := range r.Failures {
		if errors.Is(f, class) {
			return true
		}
	}
	return false
}

func TestUnknownBundleVersionRefused(t *testing.T) {
	f := getFixture(t)
	raw := f.rawBundle(t, []byte("{}"))
	b, err := attestation.ParseBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	if b.Version != 2 {
		t.Fatalf("the enclave writes version %d", b.Version)
	}
	// Re-encode as version 3 (the statement is untouched).
	w, err := attestation.MarshalDeterministic(map[int]any{1: 3, 2: b.Boot.Profile, 3: b.Boot.Evidence, 4: b.Boot.SigningKey, 6: b.Boot.Nonce, 7: b.Statement})
	if err != nil {
		t.Fatal(err)
	}
	_, err = mustNew(t, f.policy()).Verify(w)
	if !errors.Is(err, attestation.ErrUnsupportedVersion) || !errors.Is(err, attestation.ErrMalformed) {
		t.Fatalf("version 3: err = %v, want ErrUnsupportedVersion", err)
	}
}

// A version 1 bundle whose claims carry a commitment was never signed by an
// enclave of either version: it fails.
func TestVersion1WithVersion2ClaimsFails(t *testing.T) {
	f := getFixture(t)
	out := []byte(`{"entry":[{"a":1}]}`)
	raw, err := f.enclave.Attest(context.Background(), attestation.Claims{
		RequestID: "r", OutputFormat: acds.OutputFHIRR4, OutputDigest: attestation.Digest(out),
		Source:  attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest(nil)},
		Entries: &attestation.EntryCommitment{Root: make([]byte, 32), Count: 1},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := attestation.ParseBundle(raw)
	b.Version = attestation.BundleVersion1
	v1, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	r, err := mustNew(t, f.policy()).Verify(v1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid || !hasFailure(r, verify.ErrInconsistent) {
		t.Fatalf("valid %v, %v", r.Valid, r.Reasons())
	}
	if r, _ := mustNew(t, f.policy()).Verify(raw); !r.Valid {
		t.Fatalf("as version 2: %v", r.Reasons())
	}
}

// committed attests output with an entry commitment, as the server does.
func (f *fixture) committed(t testing.TB, output, key []byte) []byte {
	t.Helper()
	c, err := disclosure.Commit(key, output)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.enclave.Attest(context.Background(), attestation.Claims{
		RequestID: "req-disclose", OutputFormat: acds.OutputFHIRR4, OutputDigest: attestation.Digest(output),
		Source:  attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest([]byte("input"))},
		Entries: &attestation.EntryCommitment{Root: c.Root[:], Count: c.Count},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVerifyDisclosure(t *testing.T) {
	f := getFixture(t)
	output, err := os.ReadFile("testdata/v1-output.json")
	if err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{9}, disclosure.KeySize)
	bundle := f.committed(t, output, key)
	v := mustNew(t, f.policy())

	d, err := disclosure.New(bundle, key, output, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := d.Marshal()
	r, err := v.VerifyDisclosure(good)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Valid || len(r.Disclosed) != 1 || r.Disclosed[0].Index != 1 || r.Disclosed[0].Ref == "" {
		t.Fatalf("valid %v, disclosed %v, reasons %v", r.Valid, r.Disclosed, r.Reasons())
	}
	resp := r.Response()
	if resp.Details.Entries == nil || resp.Details.Entries.Count != 3 || len(resp.Details.Disclosed) != 1 || resp.Details.BundleVersion != 2 {
		t.Fatalf("details: %+v", resp.Details)
	}

	// A changed entry: not valid, with the disclosure check's reason.
	d.Entries[0].Entry = bytes.Replace(d.Entries[0].Entry, []byte(`"final"`), []byte(`"amended"`), 1)
	bad, _ := d.Marshal()
	r, err = v.VerifyDisclosure(bad)
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid || !hasFailure(r, disclosure.ErrNotCommitted) || len(r.Disclosed) != 0 {
		t.Fatalf("changed entry: valid %v, %v", r.Valid, r.Reasons())
	}

	// Another output's bundle under the same disclosure: the root differs.
	d2, _ := disclosure.New(f.committed(t, []byte(`{"entry":[{"a":1},{"b":2},{"c":3}]}`), key), key, output, []int{1})
	other, _ := d2.Marshal()
	if r, _ := v.VerifyDisclosure(other); r == nil || r.Valid {
		t.Fatal("a disclosure under another output's bundle verified")
	}

	if _, err := v.VerifyDisclosure([]byte("not json")); !errors.Is(err, disclosure.ErrMalformed) {
		t.Errorf("garbage: %v", err)
	}
}

// An attested query's claims are reported: expression and record digest.
func TestVerifyReportsQuery(t *testing.T) {
	f := getFixture(t)
	out := []byte(`{"parameter":[{"name":"expression","valueString":"Patient.birthDate"},{"name":"result","valueDate":"1931-07-04"}],"resourceType":"Parameters"}`)
	q := &attestation.QueryClaim{Expression: "Patient.birthDate", RecordDigest: attestation.Digest([]byte("record"))}
	raw, err := f.enclave.Attest(context.Background(), attestation.Claims{
		RequestID: "req-query", OutputFormat: acds.OutputFHIRPath, OutputDigest: attestation.Digest(out),
		Source: attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest(nil)}, Query: q,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := mustNew(t, f.policy()).VerifyOutput(raw, out)
	if err != nil || !r.Valid {
		t.Fatalf("%v %v", err, r.Reasons())
	}
	d := r.Response().Details
	if d.Query == nil || d.Query.Expression != q.Expression || d.Query.RecordDigest != q.RecordDigest || d.Entries != nil {
		t.Fatalf("details %+v", d)
	}
	// The query is signed: another expression in the claims fails.
	b, _ := attestation.ParseBundle(raw)
	b.Statement = bytes.Replace(b.Statement, []byte("Patient.birthDate"), []byte("Patient.deathDate"), 1)
	tampered, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if r, err := mustNew(t, f.policy()).Verify(tampered); err != nil || r.Valid || !hasFailure(r, verify.ErrSignature) {
		t.Fatalf("tampered query verified: %v", err)
	}
}
