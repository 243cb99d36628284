package disclosure_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/disclosure"
	"github.com/acds-project/acds/attestation/sim"
)

// attested returns a bundle of a simulated enclave whose claims attest
// out, committed under testKey unless uncommitted.
func attested(t *testing.T, out []byte, uncommitted bool) []byte {
	t.Helper()
	e, err := sim.Open(t.Context(), t.TempDir(), attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := attestation.Claims{RequestID: "r1", OutputFormat: acds.OutputFHIRR4, OutputDigest: attestation.Digest(out),
		Source: attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest([]byte("in"))}}
	if !uncommitted {
		com := commit(t, out)
		c.Entries = &attestation.EntryCommitment{Root: com.Root[:], Count: com.Count}
	}
	b, err := e.Attest(t.Context(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheckKey(t *testing.T) {
	out := output(3)
	bundle := attested(t, out, false)
	if err := disclosure.CheckKey(bundle, out, testKey); err != nil {
		t.Fatalf("matching bundle, output and key: %v", err)
	}
	otherKey := bytes.Repeat([]byte{8}, disclosure.KeySize)
	for name, tc := range map[string]struct{ bundle, out, key []byte }{
		"another key":       {bundle, out, otherKey},
		"another output":    {bundle, output(4), testKey},
		"no entries signed": {attested(t, out, true), out, testKey},
	} {
		if err := disclosure.CheckKey(tc.bundle, tc.out, tc.key); !errors.Is(err, disclosure.ErrNotTogether) {
			t.Errorf("%s: %v, want ErrNotTogether", name, err)
		}
	}
	if err := disclosure.CheckKey([]byte("not a bundle"), out, testKey); err == nil || errors.Is(err, disclosure.ErrNotTogether) {
		t.Errorf("a malformed bundle: %v, want a parse error", err)
	}
}

func TestSelect(t *testing.T) {
	out := output(4)
	got, err := disclosure.Select(out, []string{"Observation/o2", "Observation/o0"}, nil)
	if err != nil || len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Fatalf("by ref: %v %v, want [0 2]", got, err)
	}
	odd := func(res []byte) (bool, error) {
		return bytes.Contains(res, []byte(`"id":"o1"`)) || bytes.Contains(res, []byte(`"id":"o3"`)), nil
	}
	got, err = disclosure.Select(out, []string{"Observation/o0"}, odd)
	if err != nil || len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 3 {
		t.Fatalf("by ref and match: %v %v, want [0 1 3]", got, err)
	}
	if _, err := disclosure.Select(out, []string{"Observation/nope"}, nil); !errors.Is(err, disclosure.ErrNoMatch) {
		t.Errorf("an unknown ref: %v, want ErrNoMatch", err)
	}
	if _, err := disclosure.Select(out, nil, func([]byte) (bool, error) { return false, nil }); !errors.Is(err, disclosure.ErrNoMatch) {
		t.Errorf("nothing matched: %v, want ErrNoMatch", err)
	}
	boom := errors.New("boom")
	_, err = disclosure.Select(out, nil, func([]byte) (bool, error) { return false, boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "entry 0 (Observation/o0)") {
		t.Errorf("a failing match: %v, want it wrapped with the entry", err)
	}
	if _, err := disclosure.Select([]byte("[]"), nil, nil); !errors.Is(err, disclosure.ErrMalformed) {
		t.Errorf("not an output: %v, want ErrMalformed", err)
	}
}
