package mpctls

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"testing"
)

// TestCheckpoint: a signed checkpoint verifies with its fields under the
// key that signed it, and not under another key, with any byte changed,
// or as a statement (and no statement verifies as a checkpoint).
func TestCheckpoint(t *testing.T) {
	key := testKey(t, 3)
	pub := key.Public().(ed25519.PublicKey)
	c := &Checkpoint{SessionID: [16]byte{9, 8, 7}, Epoch: 4, ClientRecords: 10, ServerRecords: 77, Root: [32]byte{5}}
	b, err := c.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != CheckpointSize {
		t.Fatalf("checkpoint of %d bytes", len(b))
	}
	got, err := VerifyCheckpoint(b, []ed25519.PublicKey{pub})
	if err != nil {
		t.Fatal(err)
	}
	if *got != *c {
		t.Fatalf("verified %+v, signed %+v", got, c)
	}
	if _, err := VerifyCheckpoint(b, []ed25519.PublicKey{testKey(t, 4).Public().(ed25519.PublicKey)}); !errors.Is(err, ErrSignature) {
		t.Fatalf("untrusted key: %v", err)
	}
	if _, err := VerifyCheckpoint(b, nil); !errors.Is(err, ErrSignature) {
		t.Fatalf("no trusted key: %v", err)
	}
	for i := range b {
		x := bytes.Clone(b)
		x[i] ^= 1
		if _, err := VerifyCheckpoint(x, []ed25519.PublicKey{pub}); err == nil {
			t.Fatalf("checkpoint with byte %d flipped verifies", i)
		}
	}
	if _, err := ParseStatement(b); !errors.Is(err, ErrStatement) {
		t.Fatalf("a checkpoint parses as a statement: %v", err)
	}
	st := testStatement()
	sb, err := st.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyCheckpoint(sb, []ed25519.PublicKey{pub}); !errors.Is(err, ErrStatement) {
		t.Fatalf("a statement verifies as a checkpoint: %v", err)
	}
}
