package ot

import (
	"crypto/rand"
	"testing"
)

// FuzzBaseOT feeds arbitrary bytes to both ends of a base OT as the
// peer's message: they parse or fail with a typed error, never panic.
func FuzzBaseOT(f *testing.F) {
	sid := []byte("fuzz")
	_, smsg, err := NewBaseSender(rand.Reader, sid, 2)
	if err != nil {
		f.Fatal(err)
	}
	_, rmsg, err := NewBaseReceiver(rand.Reader, sid, []bool{false, true})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(smsg)
	f.Add(rmsg)
	f.Add([]byte{0})
	f.Add(make([]byte, 4*pointSize))
	f.Fuzz(func(t *testing.T, msg []byte) {
		s, _, err := NewBaseSender(rand.Reader, sid, 2)
		if err != nil {
			t.Fatal(err)
		}
		if pairs, err := s.Finish(msg); err == nil && len(pairs) != 2 {
			t.Fatalf("%d pairs", len(pairs))
		}
		r, _, err := NewBaseReceiver(rand.Reader, sid, []bool{true, false})
		if err != nil {
			t.Fatal(err)
		}
		if seeds, err := r.Finish(msg); err == nil && len(seeds) != 2 {
			t.Fatalf("%d seeds", len(seeds))
		}
	})
}

// FuzzExtension feeds arbitrary matrices, challenges and responses to the
// extension's parsers.
func FuzzExtension(f *testing.F) {
	s, r := extension(f, Block{0x1234, 0x5678})
	u, err := r.Extend(64, rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	chal, err := s.Expand(u, 64, rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	resp, _, _, err := r.Respond(chal)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := s.Check(resp); err != nil {
		f.Fatal(err)
	}
	f.Add(u, chal, resp)
	f.Add([]byte{}, []byte{1}, []byte{2})
	f.Fuzz(func(t *testing.T, u, chal, resp []byte) {
		if _, err := s.Expand(u, 64, rand.Reader); err == nil {
			if _, err := s.Check(resp); err == nil && len(resp) != ResponseSize {
				t.Fatal("a response of the wrong size passed")
			}
		}
		if _, err := r.Extend(64, rand.Reader); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := r.Respond(chal); err == nil && len(chal) != ChallengeSize {
			t.Fatal("a challenge of the wrong size was accepted")
		}
	})
}
