package tpm

import (
	"bytes"
	"crypto"
	"errors"
	"math/rand/v2"
	"testing"

	attestpb "github.com/google/go-tpm-tools/proto/attest"
	"google.golang.org/protobuf/proto"
)

// TestVerifyRandomMutations changes the committed attestation at random
// (deterministically seeded): raw bytes of the encoding, and bytes inside the
// TPM structures the third-party decoders read (AK public area, TPMS_ATTEST,
// signature, event log). Every result must be a classified error or, for
// changes that cannot matter, the original measurement; never a panic.
func TestVerifyRandomMutations(t *testing.T) {
	v := simVectors(t)
	opts := Options{TrustedAKs: []crypto.PublicKey{v.ak}}
	want, err := Verify(v.att, v.nonce, opts)
	if err != nil {
		t.Fatal(err)
	}
	var orig attestpb.Attestation
	if err := proto.Unmarshal(v.att, &orig); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	n := 600
	if testing.Short() {
		n = 100
	}
	mutate := func(b []byte) []byte {
		b = bytes.Clone(b)
		if len(b) == 0 {
			return b
		}
		for range 1 + r.IntN(3) {
			b[r.IntN(len(b))] = byte(r.IntN(256))
		}
		if r.IntN(3) == 0 {
			b = b[:r.IntN(len(b))]
		}
		return b
	}
	for i := range n {
		var att []byte
		if r.IntN(3) == 0 {
			att = mutate(v.att)
		} else {
			a := proto.Clone(&orig).(*attestpb.Attestation)
			switch r.IntN(4) {
			case 0:
				a.AkPub = mutate(a.AkPub)
			case 1:
				for _, q := range a.Quotes {
					q.Quote = mutate(q.Quote)
				}
			case 2:
				for _, q := range a.Quotes {
					q.RawSig = mutate(q.RawSig)
				}
			case 3:
				a.EventLog = mutate(a.EventLog)
			}
			att, _ = proto.Marshal(a)
		}
		ev, err := Verify(att, v.nonce, opts)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("mutation %d: unclassified error %v", i, err)
			}
			continue
		}
		if !bytes.Equal(ev.Measurement, want.Measurement) {
			t.Fatalf("mutation %d verified with measurement %s", i, ev.Measurement)
		}
	}
}
