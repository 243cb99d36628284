package ot

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"
)

func baseOTs(t testing.TB, choices []bool) ([][2]Seed, []Seed) {
	t.Helper()
	sid := []byte("test session")
	s, smsg, err := NewBaseSender(rand.Reader, sid, len(choices))
	if err != nil {
		t.Fatal(err)
	}
	r, rmsg, err := NewBaseReceiver(rand.Reader, sid, choices)
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := s.Finish(rmsg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Finish(smsg)
	if err != nil {
		t.Fatal(err)
	}
	return pairs, got
}

func TestBaseOT(t *testing.T) {
	choices := []bool{false, true, true, false, true, false, false, true}
	pairs, got := baseOTs(t, choices)
	for i, c := range choices {
		k := 0
		if c {
			k = 1
		}
		if got[i] != pairs[i][k] {
			t.Fatalf("OT %d: the receiver's seed is not the one of its choice", i)
		}
		if got[i] == pairs[i][1-k] || pairs[i][0] == pairs[i][1] {
			t.Fatalf("OT %d: seeds collide", i)
		}
	}
}

func TestBaseOTMalformed(t *testing.T) {
	sid := []byte("s")
	s, smsg, err := NewBaseSender(rand.Reader, sid, 2)
	if err != nil {
		t.Fatal(err)
	}
	r, rmsg, err := NewBaseReceiver(rand.Reader, sid, []bool{true, false})
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), rmsg...)
	bad[0] = 0x05 // not a compressed point tag
	for name, msg := range map[string][]byte{"short": rmsg[:10], "long": append(rmsg, 0), "tag": bad} {
		s, _, err := NewBaseSender(rand.Reader, sid, 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Finish(msg); !errors.Is(err, ErrMessage) {
			t.Errorf("%s receiver message: %v", name, err)
		}
	}
	if _, err := s.Finish(rmsg); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(rmsg); !errors.Is(err, ErrState) {
		t.Errorf("sender finished twice: %v", err)
	}
	// The sender's key agreement message must be a point, not infinity.
	if _, err := r.Finish([]byte{0}); !errors.Is(err, ErrMessage) {
		t.Errorf("infinity: %v", err)
	}
	if _, err := r.Finish(smsg); !errors.Is(err, ErrState) {
		t.Errorf("receiver finished after a failure: %v", err)
	}
	r, _, err = NewBaseReceiver(rand.Reader, sid, []bool{true, false})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finish(smsg); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finish(smsg); !errors.Is(err, ErrState) {
		t.Errorf("second finish: %v", err)
	}
	if _, _, err := NewBaseSender(rand.Reader, sid, 0); !errors.Is(err, ErrState) {
		t.Errorf("no OTs: %v", err)
	}
}

// extension runs base OTs and returns a sender with correlation delta and
// its receiver.
func extension(t testing.TB, delta Block) (*Sender, *Receiver) {
	t.Helper()
	pairs, got := baseOTs(t, DeltaChoices(delta))
	s, err := NewSender(delta, got)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReceiver(pairs)
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}

func randomBlock(t testing.TB) Block {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return BlockOf(b[:])
}

func TestExtension(t *testing.T) {
	delta := randomBlock(t)
	s, r := extension(t, delta)
	for _, n := range []int{1, 100, 1000, 4096} {
		u, err := r.Extend(n, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		chal, err := s.Expand(u, n, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		resp, choices, tt, err := r.Respond(chal)
		if err != nil {
			t.Fatal(err)
		}
		q, err := s.Check(resp)
		if err != nil {
			t.Fatal(err)
		}
		if len(q) != n || len(tt) != n || len(choices) != n {
			t.Fatalf("batch of %d: %d, %d, %d", n, len(q), len(tt), len(choices))
		}
		ones := 0
		for j := range q {
			want := q[j]
			if choices[j] {
				want = want.Xor(delta)
				ones++
			}
			if tt[j] != want {
				t.Fatalf("batch %d, OT %d: t ≠ q ⊕ r·Δ", n, j)
			}
		}
		if n >= 1000 && (ones < n/3 || ones > 2*n/3) {
			t.Fatalf("choices are not random: %d ones of %d", ones, n)
		}
	}
}

// TestKOSCatchesInconsistentChoices: a receiver that uses other choice
// bits in one row of its matrix (to learn that bit of Δ) fails the check
// when the bit is 1. When it is 0 the row does not matter and the check
// passes: that is the one bit such a cheat can learn, at the price of an
// abort with probability 1/2 — the leakage KOS accounts for.
func TestKOSCatchesInconsistentChoices(t *testing.T) {
	for _, bit := range []uint64{1, 0} {
		delta := randomBlock(t)
		const row = 5
		delta[0] = delta[0]&^(1<<row) | bit<<row
		s, r := extension(t, delta)
		const n = 512
		u, err := r.Extend(n, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		rowBytes := padded(n) / 8
		u[row*rowBytes+3] ^= 0x10 // other choices in row 5
		chal, err := s.Expand(u, n, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		resp, _, _, err := r.Respond(chal)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Check(resp)
		if bit == 1 && !errors.Is(err, ErrConsistency) {
			t.Fatalf("Δ bit 1: inconsistent row passed: %v", err)
		}
		if bit == 0 && err != nil {
			t.Fatalf("Δ bit 0: %v", err)
		}
	}
	// A forged response fails too.
	delta := randomBlock(t)
	s, r := extension(t, delta)
	u, _ := r.Extend(64, rand.Reader)
	chal, _ := s.Expand(u, 64, rand.Reader)
	resp, _, _, _ := r.Respond(chal)
	resp[20] ^= 1
	if _, err := s.Check(resp); !errors.Is(err, ErrConsistency) {
		t.Fatalf("forged response: %v", err)
	}
}

func TestExtensionErrors(t *testing.T) {
	s, r := extension(t, randomBlock(t))
	if _, err := s.Expand(make([]byte, 5), 64, rand.Reader); !errors.Is(err, ErrMessage) {
		t.Errorf("short matrix: %v", err)
	}
	if _, err := s.Check(make([]byte, ResponseSize)); !errors.Is(err, ErrState) {
		t.Errorf("check without batch: %v", err)
	}
	if _, _, _, err := r.Respond(make([]byte, ChallengeSize)); !errors.Is(err, ErrState) {
		t.Errorf("respond without batch: %v", err)
	}
	if _, err := r.Extend(0, rand.Reader); !errors.Is(err, ErrState) {
		t.Errorf("empty batch: %v", err)
	}
	u, _ := r.Extend(64, rand.Reader)
	if _, err := r.Extend(64, rand.Reader); !errors.Is(err, ErrState) {
		t.Errorf("two batches at once: %v", err)
	}
	if _, _, _, err := r.Respond(make([]byte, 3)); !errors.Is(err, ErrMessage) {
		t.Errorf("short challenge: %v", err)
	}
	chal, _ := s.Expand(u, 64, rand.Reader)
	if _, err := s.Check(chal); !errors.Is(err, ErrMessage) {
		t.Errorf("short response: %v", err)
	}
}

func TestPad(t *testing.T) {
	a, b := make([]byte, 70), make([]byte, 70)
	Pad([]byte("d"), 1, Block{1, 2}, a)
	Pad([]byte("d"), 1, Block{1, 2}, b)
	if !bytes.Equal(a, b) {
		t.Fatal("Pad is not deterministic")
	}
	Pad([]byte("d"), 2, Block{1, 2}, b)
	if bytes.Equal(a, b) {
		t.Fatal("Pad ignores the index")
	}
}
