package attestation_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
)

func v2Claims() *attestation.Claims {
	return &attestation.Claims{
		RequestID: "r", OutputFormat: acds.OutputFHIRR4, OutputDigest: attestation.Digest([]byte("o")),
		Source:      attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest(nil)},
		IssuedAt:    time.Unix(1_800_000_000, 0).UTC(),
		Measurement: bytes.Repeat([]byte{1}, 48),
		Entries:     &attestation.EntryCommitment{Root: bytes.Repeat([]byte{2}, 32), Count: 7},
		Query:       &attestation.QueryClaim{Expression: "Patient.birthDate", RecordDigest: attestation.Digest([]byte("rec"))},
	}
}

// The version 2 claims survive encoding, and their rules refuse what no
// enclave signs.
func TestClaimsVersion2(t *testing.T) {
	b, err := attestation.MarshalClaims(v2Claims())
	if err != nil {
		t.Fatal(err)
	}
	c, err := attestation.ParseClaims(b)
	if err != nil {
		t.Fatal(err)
	}
	if c.Entries == nil || c.Entries.Count != 7 || !bytes.Equal(c.Entries.Root, v2Claims().Entries.Root) || c.Query == nil || *c.Query != *v2Claims().Query {
		t.Fatalf("round trip: %+v %+v", c.Entries, c.Query)
	}
	for name, edit := range map[string]func(c *attestation.Claims){
		"short root":    func(c *attestation.Claims) { c.Entries.Root = c.Entries.Root[:31] },
		"no entries":    func(c *attestation.Claims) { c.Entries.Count = 0 },
		"empty query":   func(c *attestation.Claims) { c.Query.Expression = "" },
		"long query":    func(c *attestation.Claims) { c.Query.Expression = strings.Repeat("a", acds.MaxQueryLen+1) },
		"record digest": func(c *attestation.Claims) { c.Query.RecordDigest = "sha256:xyz" },
	} {
		c := v2Claims()
		edit(c)
		if _, err := attestation.MarshalClaims(c); !errors.Is(err, attestation.ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

// Version 1 and 2 bundles parse; any other version is refused as
// unsupported.
func TestBundleVersions(t *testing.T) {
	if attestation.BundleVersion != 2 || attestation.BundleVersion1 != 1 {
		t.Fatalf("versions %d, %d", attestation.BundleVersion, attestation.BundleVersion1)
	}
	for _, v := range []int{0, 3, 99} {
		b, err := attestation.MarshalDeterministic(map[int]any{1: v, 2: "sev-snp-sim", 3: []byte{1}, 4: []byte{1}, 6: []byte{1}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = attestation.ParseBundle(b)
		if !errors.Is(err, attestation.ErrUnsupportedVersion) || !strings.Contains(err.Error(), "unsupported version") {
			t.Errorf("version %d: %v", v, err)
		}
	}
}
