package attestation_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
)

func fetchedClaims() *attestation.Claims {
	return &attestation.Claims{
		RequestID: "r", OutputFormat: acds.OutputFHIRR4, OutputDigest: attestation.Digest([]byte("o")),
		Source: attestation.Source{Kind: acds.SourceMPCTLS, Sessions: []attestation.Session{{
			StatementDigest: attestation.Digest([]byte("s")), RequestLine: "GET /fhir/metadata HTTP/1.1", Host: "portal.example"}}},
		IssuedAt:    time.Unix(1_800_000_000, 0).UTC(),
		Measurement: bytes.Repeat([]byte{1}, 48),
		Coverage: &acds.Coverage{CapabilityStatement: true, Requests: []acds.CoverageRequest{
			{RequestLine: "GET /fhir/metadata HTTP/1.1", Status: 200, Pages: 1},
			{RequestLine: "GET /fhir/Observation?subject=Patient%2F7 HTTP/1.1", Status: 200, Pages: 3, Entries: 250},
		}, Unsupported: []string{"Claim", "Coverage"}},
	}
}

// A fetched output's coverage survives the claims' encoding, claims
// without one still parse (as every bundle made before coverage was
// signed), and the rules refuse what no connector records.
func TestClaimsCoverage(t *testing.T) {
	b, err := attestation.MarshalClaims(fetchedClaims())
	if err != nil {
		t.Fatal(err)
	}
	c, err := attestation.ParseClaims(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Coverage, fetchedClaims().Coverage) {
		t.Fatalf("round trip: %+v", c.Coverage)
	}
	old := fetchedClaims()
	old.Coverage = nil
	b, err = attestation.MarshalClaims(old)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := attestation.ParseClaims(b); err != nil || c.Coverage != nil {
		t.Fatalf("claims without coverage: %+v, %v", c, err)
	}
	for name, edit := range map[string]func(c *attestation.Claims){
		"raw source": func(c *attestation.Claims) {
			c.Source = attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest(nil)}
		},
		"no requests":     func(c *attestation.Claims) { c.Coverage.Requests = nil },
		"empty line":      func(c *attestation.Claims) { c.Coverage.Requests[0].RequestLine = "" },
		"long line":       func(c *attestation.Claims) { c.Coverage.Requests[0].RequestLine = strings.Repeat("a", 2049) },
		"status":          func(c *attestation.Claims) { c.Coverage.Requests[1].Status = 99 },
		"no page":         func(c *attestation.Claims) { c.Coverage.Requests[1].Pages = 0 },
		"negative count":  func(c *attestation.Claims) { c.Coverage.Requests[1].Entries = -1 },
		"unsorted types":  func(c *attestation.Claims) { c.Coverage.Unsupported = []string{"Coverage", "Claim"} },
		"repeated type":   func(c *attestation.Claims) { c.Coverage.Unsupported = []string{"Claim", "Claim"} },
		"not a type name": func(c *attestation.Claims) { c.Coverage.Unsupported = []string{"claim"} },
	} {
		c := fetchedClaims()
		edit(c)
		if _, err := attestation.MarshalClaims(c); !errors.Is(err, attestation.ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	c = fetchedClaims()
	c.Coverage.Requests = make([]acds.CoverageRequest, 4097)
	for i := range c.Coverage.Requests {
		c.Coverage.Requests[i] = acds.CoverageRequest{RequestLine: "GET /fhir/Practitioner/1 HTTP/1.1", Status: 200, Pages: 1, Entries: 1}
	}
	if _, err := attestation.MarshalClaims(c); !errors.Is(err, attestation.ErrTooLarge) {
		t.Errorf("4097 requests: err = %v, want ErrTooLarge", err)
	}
}

// The claims of a large fetch — a search of every compartment parameter
// and a hundred reference reads — fit the statement bound.
func TestClaimsCoverageFits(t *testing.T) {
	c := fetchedClaims()
	c.Coverage.Requests = nil
	for i := range 2000 {
		c.Coverage.Requests = append(c.Coverage.Requests, acds.CoverageRequest{
			RequestLine: "GET /fhir/ExplanationOfBenefit?patient=Patient%2Ff1c6a5b3-8ab4-4bd6-9b9a-7f1c0c2f7e1" + strings.Repeat("0", i%10) + "&_count=100 HTTP/1.1",
			Status:      200, Pages: 3, Entries: 250})
	}
	b, err := attestation.MarshalClaims(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > attestation.MaxStatementSize-1024 {
		t.Fatalf("claims of 2000 requests are %d bytes, the statement bound %d", len(b), attestation.MaxStatementSize)
	}
	if _, err := attestation.ParseClaims(b); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseClaims: the claims parser never panics, and what it accepts
// encodes back to the same bytes (the encoding is deterministic).
func FuzzParseClaims(f *testing.F) {
	for _, c := range []*attestation.Claims{fetchedClaims(), v2Claims()} {
		b, err := attestation.MarshalClaims(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xa0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := attestation.ParseClaims(b)
		if err != nil {
			return
		}
		again, err := attestation.MarshalClaims(c)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted claims re-encode differently (%v)", err)
		}
	})
}
