package mpc

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls/mpc/garble"
)

// FuzzParse feeds arbitrary bytes to every parser of the engine's
// messages: each accepts exactly its size and fails with ErrProtocol
// otherwise.
func FuzzParse(f *testing.F) {
	const n = 13
	f.Add(make([]byte, 2))
	f.Add(putBits(make([]bool, n)))
	f.Add(putLabels(nil, make([]garble.Label, n)))
	f.Add(putCall(3, 99, [32]byte{1}))
	f.Add(putFinalReveal(finalReveal{values: make([]bool, n), gbLabel: make([]garble.Label, n), scalar: make([]byte, 32)}))
	f.Add(append(putLabels(nil, make([]garble.Label, n)), 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(err error) {
			if err != nil && !errors.Is(err, ErrProtocol) {
				t.Fatalf("untyped error: %v", err)
			}
		}
		if bits, err := parseBits(b, n); err == nil {
			if string(putBits(bits)) != string(b) {
				t.Fatal("bits do not round-trip")
			}
		} else {
			check(err)
		}
		_, err := parseLabels(b, n)
		check(err)
		_, _, err = parseInputLabels(b, n)
		check(err)
		if idx, base, d, err := parseCall(b); err == nil {
			if string(putCall(idx, base, d)) != string(b) {
				t.Fatal("call does not round-trip")
			}
		} else {
			check(err)
		}
		_, _, err = parseDecoded(b, n)
		check(err)
		for _, sc := range []bool{false, true} {
			if r, err := parseFinalReveal(b, n, sc); err == nil {
				if string(putFinalReveal(r)) != string(b) {
					t.Fatal("reveal does not round-trip")
				}
			} else {
				check(err)
			}
		}
	})
}

// frameOf builds one frame.
func frameOf(s stream, typ ftype, seq uint32, payload []byte) []byte {
	h := make([]byte, headerSize, headerSize+len(payload))
	h[0], h[1] = byte(s), byte(typ)
	binary.BigEndian.PutUint32(h[2:], seq)
	binary.BigEndian.PutUint32(h[6:], uint32(len(payload)))
	return append(h, payload...)
}

// FuzzPeer plays an arbitrary byte stream as the prover to a notary
// setting up a session: the notary fails with a typed error within its
// idle timeout, never panics, hangs or allocates beyond its bounds.
func FuzzPeer(f *testing.F) {
	hello := append([]byte("acds-mpc-1"), byte(Prover))
	hello = append(hello, make([]byte, 32)...)
	f.Add(frameOf(control, tHello, 0, hello))
	f.Add(append(frameOf(control, tHello, 0, hello), frameOf(control, tBaseOT, 1, make([]byte, 40))...))
	f.Add(frameOf(control, tAbort, 7, []byte("bye")))
	f.Add(frameOf(bulk, tTables, 0, make([]byte, 16)))
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, stream []byte) {
		a, b := net.Pipe()
		go func() {
			// Drain what the notary sends until the pipe closes.
			buf := make([]byte, 4096)
			for {
				if _, err := a.Read(buf); err != nil {
					return
				}
			}
		}()
		go func() {
			a.SetWriteDeadline(time.Now().Add(time.Second))
			a.Write(stream)
			a.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := NewSession(ctx, b, Notary, Config{IdleTimeout: 200 * time.Millisecond, OTBatch: 64})
		if err == nil {
			s.Close()
			t.Fatal("an arbitrary stream set up a session")
		}
		for _, c := range []error{ErrProtocol, ErrTruncated, ErrTimeout, ErrPeerAborted, ErrCheat, ErrLimit, ErrClosed, context.DeadlineExceeded} {
			if errors.Is(err, c) {
				return
			}
		}
		t.Fatalf("untyped error: %v", err)
	})
}
