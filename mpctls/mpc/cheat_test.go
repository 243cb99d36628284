package mpc

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/acds-project/acds/mpctls/mpc/circuit"
	"github.com/acds-project/acds/mpctls/mpc/garble"
)

// The deviations of each party and the check that catches each. A
// deviating party runs this package's code with a cheat hook; "caught"
// means the honest party's session fails with ErrCheat (or ErrProtocol
// for a message out of step), so a notary signs nothing.

// twoOut is C(x, y) = (x + y mod 2⁶⁴, x ∧ y) for 64-bit x of P and y of
// N: the first output is kept shared, the second opened to P. With x = 0
// the second is 0 and tells P nothing.
func twoOut(t testing.TB) *circuit.Circuit {
	b := circuit.NewBuilder()
	x, y := b.Input(64), b.Input(64)
	b.Output(b.Add(x, y))
	b.Output(b.ANDs(x, y))
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type twoOutResult struct {
	share, toP []byte
}

func twoOutProg(c *circuit.Circuit, role Role, x, y []byte, r *twoOutResult) party {
	return func(ctx context.Context, s *Session) error {
		var mx, my []byte
		if role == Prover {
			mx = x
		} else {
			my = y
		}
		xv, err := s.InputValue(ctx, Prover, 64, mx)
		if err != nil {
			return err
		}
		yv, err := s.InputValue(ctx, Notary, 64, my)
		if err != nil {
			return err
		}
		out, err := s.Call(ctx, c, xv, yv)
		if err != nil {
			return err
		}
		if r.share, err = s.Share(ctx, out[0]); err != nil {
			return err
		}
		r.toP, err = s.Open(ctx, out[1], ToProver)
		return err
	}
}

func expectCaught(t *testing.T, who string, err error, classes ...error) {
	t.Helper()
	if len(classes) == 0 {
		classes = []error{ErrCheat}
	}
	for _, c := range classes {
		if errors.Is(err, c) {
			return
		}
	}
	t.Fatalf("%s: %v, want one of %v", who, err, classes)
}

// TestGarblerWrongCircuit: P garbles another circuit than C, with the
// same topology — the only kind a garbler can substitute undetected at
// once: a NOT on each bit of its input x, so that x ∧ y becomes ¬x ∧ y = y
// for x = 0, and the output opened to P routes N's input to it. P learns
// y during the session — the premature leak dual execution with
// asymmetric privacy accepts for N's ephemeral inputs — but N's Finalize
// rejects the session, so nothing P learnt can back a signed statement.
func TestGarblerWrongCircuit(t *testing.T) {
	c := twoOut(t)
	x, y := make([]byte, 8), randBytes(t, 8)
	var rp, rn twoOutResult
	cp := &cheats{ignore: true, garble: func(k int, in []garble.Label, delta garble.Label) {
		for i := 0; i < 64; i++ {
			in[i] = in[i].Xor(delta)
		}
	}}
	errP, errN := run(t, Config{}, cp, nil, twoOutProg(c, Prover, x, y, &rp), twoOutProg(c, Notary, x, y, &rn))
	if !bytes.Equal(rp.toP, y) {
		t.Fatalf("the deviation did not take effect: P got %x (%v / %v)", rp.toP, errP, errN)
	}
	expectCaught(t, "notary", errN)
	expectCaught(t, "prover", errP, ErrPeerAborted)
	// The same session honestly: P learns x ∧ y = 0.
	rp, rn = twoOutResult{}, twoOutResult{}
	must(t)(run(t, Config{}, nil, nil, twoOutProg(c, Prover, x, y, &rp), twoOutProg(c, Notary, x, y, &rn)))
	if !bytes.Equal(rp.toP, make([]byte, 8)) {
		t.Fatalf("honest run: P got %x", rp.toP)
	}
}

// TestGarblerFlipsTables: P corrupts its garbled tables (and ignores that
// N's decodings then fail its own check).
func TestGarblerFlipsTables(t *testing.T) {
	add := twoOut(t)
	xv, yv := randBytes(t, 8), randBytes(t, 8)
	var rp, rn twoOutResult
	cp := &cheats{ignore: true, tables: func(k int, t []byte) {
		for i := 0; i < len(t); i += 16 {
			t[i] ^= 0x01
		}
	}}
	errP, errN := run(t, Config{}, cp, nil, twoOutProg(add, Prover, xv, yv, &rp), twoOutProg(add, Notary, xv, yv, &rn))
	expectCaught(t, "notary", errN)
	expectCaught(t, "prover", errP, ErrPeerAborted)
}

// TestGarblerLiesInOT: P sends N wrong label corrections for N's input
// (a selective-failure attempt).
func TestGarblerLiesInOT(t *testing.T) {
	c := twoOut(t)
	x, y := randBytes(t, 8), randBytes(t, 8)
	var rp, rn twoOutResult
	first := true
	cp := &cheats{ignore: true, corrections: func(corr []byte) {
		if first { // N's input y: every label off
			for i := 0; i < len(corr); i += 16 {
				corr[i] ^= 0x40
			}
			first = false
		}
	}}
	errP, errN := run(t, Config{}, cp, nil, twoOutProg(c, Prover, x, y, &rp), twoOutProg(c, Notary, x, y, &rn))
	expectCaught(t, "notary", errN)
	expectCaught(t, "prover", errP, ErrPeerAborted)
}

// TestGarblerFlipsDecoding: P sends wrong decoding bits, so that N
// decodes a wrong value.
func TestGarblerFlipsDecoding(t *testing.T) {
	c := twoOut(t)
	x, y := randBytes(t, 8), randBytes(t, 8)
	var rp, rn twoOutResult
	cp := &cheats{ignore: true, decodeBits: func(perm []bool) { perm[0] = !perm[0] }}
	errP, errN := run(t, Config{}, cp, nil, twoOutProg(c, Prover, x, y, &rp), twoOutProg(c, Notary, x, y, &rn))
	expectCaught(t, "notary", errN)
	expectCaught(t, "prover", errP, ErrPeerAborted)
}

// TestEvaluatorWrongOutput: N claims another decoded bit than its labels
// carry; P sees it at once.
func TestEvaluatorWrongOutput(t *testing.T) {
	c := twoOut(t)
	x, y := randBytes(t, 8), randBytes(t, 8)
	var rp, rn twoOutResult
	cn := &cheats{decoded: func(bits []bool) { bits[3] = !bits[3] }}
	errP, errN := run(t, Config{}, nil, cn, twoOutProg(c, Prover, x, y, &rp), twoOutProg(c, Notary, x, y, &rn))
	expectCaught(t, "prover", errP)
	expectCaught(t, "notary", errN, ErrPeerAborted)
}

// TestInconsistentOTChoices: a receiver of OT extension whose matrix rows
// use other choices fails the KOS check. Row 0 probes bit 0 of Δ, which
// is always 1 (point-and-permute), so the check fails for sure.
func TestInconsistentOTChoices(t *testing.T) {
	flipRow0 := &cheats{matrix: func(u []byte) { u[1] ^= 0x10 }}
	nop := func(ctx context.Context, s *Session) error { return nil }
	errP, errN := run(t, Config{}, nil, flipRow0, nop, nop)
	expectCaught(t, "prover (sender of instance A)", errP)
	expectCaught(t, "notary", errN, ErrPeerAborted, ErrCheat)
	errP, errN = run(t, Config{}, flipRow0, nil, nop, nop)
	expectCaught(t, "notary (sender of instance B)", errN)
	expectCaught(t, "prover", errP, ErrPeerAborted, ErrCheat)
}

// TestWrongECtFShare: N enters another share of the pre-master secret
// than the conversion gave it; P's replay of N's part at Finalize catches
// it (the TLS handshake would fail earlier).
func TestWrongECtFShare(t *testing.T) {
	server, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var shareP, shareN, pmsP, pmsN []byte
	cn := &cheats{ectfShare: func(s *[32]byte) { s[31] ^= 1 }}
	errP, errN := run(t, Config{}, nil, cn, ecdhProg(t, server, &shareP, &pmsP), ecdhProg(t, server, &shareN, &pmsN))
	expectCaught(t, "prover", errP)
	expectCaught(t, "notary", errN, ErrPeerAborted)
	client, _ := ecdh.P256().NewPublicKey(shareP)
	want, _ := server.ECDH(client)
	if bytes.Equal(pmsP, want) {
		t.Fatal("a wrong share gave the right pre-master secret")
	}
}

// TestNotaryLiesAtFinalize: N reveals other inputs than it evaluated on,
// another Δ, another seed, or tampers with its proof garbling or its OT
// corrections; P checks all before it opens anything.
func TestNotaryLiesAtFinalize(t *testing.T) {
	c := twoOut(t)
	cases := map[string]*cheats{
		"input":       {reveal: func(r *finalReveal) { r.values[0] = !r.values[0] }},
		"proof label": {reveal: func(r *finalReveal) { r.gbLabel[1][0] ^= 4 }},
		"delta":       {open: func(o []byte) { o[3] ^= 1 }},
		"seed":        {open: func(o []byte) { o[20] ^= 1 }},
		"base seed":   {open: func(o []byte) { o[40] ^= 1 }},
		"tables":      {tables: func(k int, t []byte) { t[0] ^= 1 }},
		"ot":          {corrections: func(corr []byte) { corr[0] ^= 1 }},
	}
	for name, cn := range cases {
		t.Run(name, func(t *testing.T) {
			x, y := randBytes(t, 8), randBytes(t, 8)
			var rp, rn twoOutResult
			errP, errN := run(t, Config{}, nil, cn, twoOutProg(c, Prover, x, y, &rp), twoOutProg(c, Notary, x, y, &rn))
			expectCaught(t, "prover", errP)
			expectCaught(t, "notary", errN, ErrPeerAborted)
		})
	}
}

// TestOutOfStep: parties that call different circuits are stopped at the
// first message of the call.
func TestOutOfStep(t *testing.T) {
	a := twoOut(t)
	bb := circuit.NewBuilder()
	x1, y1 := bb.Input(64), bb.Input(64)
	bb.Output(bb.XORs(x1, y1))
	bb.Output(bb.ANDs(x1, y1))
	b, err := bb.Build()
	if err != nil {
		t.Fatal(err)
	}
	x, y := randBytes(t, 8), randBytes(t, 8)
	var rp, rn twoOutResult
	errP, errN := run(t, Config{}, nil, nil, twoOutProg(a, Prover, x, y, &rp), twoOutProg(b, Notary, x, y, &rn))
	expectCaught(t, "prover", errP, ErrProtocol, ErrPeerAborted)
	expectCaught(t, "notary", errN, ErrProtocol, ErrPeerAborted)
}

// relay copies frames from src to dst, applying f to each whole frame
// (header and payload) of the P→N direction.
func relay(dst, src net.Conn, f func(n int, frame []byte) [][]byte) {
	defer dst.Close()
	hdr := make([]byte, headerSize)
	for n := 0; ; n++ {
		if _, err := io.ReadFull(src, hdr); err != nil {
			return
		}
		payload := make([]byte, binary.BigEndian.Uint32(hdr[6:]))
		if _, err := io.ReadFull(src, payload); err != nil {
			return
		}
		fr := append(append([]byte(nil), hdr...), payload...)
		out := [][]byte{fr}
		if f != nil {
			out = f(n, fr)
		}
		for _, o := range out {
			if o == nil { // cut the connection here
				return
			}
			if _, err := dst.Write(o); err != nil {
				return
			}
		}
	}
}

// runRelayed runs a compression with the prover's frames passing through
// f on their way to the notary.
func runRelayed(t *testing.T, f func(n int, frame []byte) [][]byte) (error, error) {
	p, pr := net.Pipe()
	nr, n := net.Pipe()
	go relay(nr, pr, f)
	go relay(pr, nr, nil)
	c := compressCircuit(t)
	state, block := randBytes(t, 32), randBytes(t, 64)
	prog := func(role Role) party {
		return func(ctx context.Context, s *Session) error {
			var sv, bv []byte
			if role == Prover {
				sv, bv = state, block
			}
			xv, err := s.InputValue(ctx, Prover, 256, sv)
			if err != nil {
				return err
			}
			yv, err := s.InputValue(ctx, Prover, 512, bv)
			if err != nil {
				return err
			}
			out, err := s.Call(ctx, c, xv, yv)
			if err != nil {
				return err
			}
			_, err = s.Open(ctx, out[0], ToBoth)
			return err
		}
	}
	return runOn(t, p, n, Config{}, nil, nil, prog(Prover), prog(Notary))
}

// TestReplayedFrame: a frame of the prover's replayed (sent twice) on the
// way is rejected by its sequence number.
func TestReplayedFrame(t *testing.T) {
	errP, errN := runRelayed(t, func(n int, fr []byte) [][]byte {
		if n == 3 {
			return [][]byte{fr, fr}
		}
		return [][]byte{fr}
	})
	expectCaught(t, "notary", errN, ErrProtocol)
	expectCaught(t, "prover", errP, ErrPeerAborted, ErrTruncated)
}

// TestDroppedFrame: a frame dropped on the way is detected the same way.
func TestDroppedFrame(t *testing.T) {
	errP, errN := runRelayed(t, func(n int, fr []byte) [][]byte {
		if n == 2 {
			return [][]byte{}
		}
		return [][]byte{fr}
	})
	expectCaught(t, "notary", errN, ErrProtocol)
	expectCaught(t, "prover", errP, ErrPeerAborted, ErrTruncated)
}

// TestTruncated: the connection cut in the middle of a frame.
func TestTruncated(t *testing.T) {
	errP, errN := runRelayed(t, func(n int, fr []byte) [][]byte {
		if n == 4 {
			return [][]byte{fr[:len(fr)/2], nil}
		}
		return [][]byte{fr}
	})
	_ = errP
	expectCaught(t, "notary", errN, ErrTruncated, ErrTimeout)
}
