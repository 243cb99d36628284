package mpc

import (
	"context"
	"fmt"
	"io"

	"filippo.io/bigmod"
	"filippo.io/nistec"

	"github.com/acds-project/acds/mpctls/mpc/circuit"
	"github.com/acds-project/acds/mpctls/mpc/ectf"
)

// keyExchange is the session's ECDHE key: scalar a of P or b of N, the
// notary's public share, and the conversion's state.
type keyExchange struct {
	scalar  []byte
	pubN    *nistec.P256Point
	server  *nistec.P256Point
	prover  *ectf.Prover
	sNInput int // the input holding N's share
	ran     bool
}

var orderN = func() *bigmod.Modulus {
	m, err := bigmod.NewModulus([]byte{
		0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
	})
	if err != nil {
		panic(err)
	}
	return m
}()

func randomScalar(r io.Reader) ([]byte, error) {
	b := make([]byte, 32)
	for {
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		n, err := bigmod.NewNat().SetBytes(b, orderN)
		if err == nil && n.IsZero() == 0 {
			return b, nil
		}
	}
}

// KeyShare makes the session's P-256 ECDHE key, aG + bG with a the
// prover's scalar and b the notary's, and returns it (65 bytes,
// uncompressed) on both sides: the client key share to send the server.
// The prover commits to aG before it sees bG, so neither party can choose
// its share to cancel the other's. One per session.
func (s *Session) KeyShare(ctx context.Context) ([]byte, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	if s.kx != nil {
		return nil, fmt.Errorf("%w: one key share per session", ErrUsage)
	}
	q, err := s.keyShare(ctx)
	if err != nil {
		return nil, s.fail(err)
	}
	return q, nil
}

func (s *Session) keyShare(ctx context.Context) ([]byte, error) {
	sc, err := randomScalar(s.rand)
	if err != nil {
		return nil, err
	}
	mine, err := nistec.NewP256Point().ScalarBaseMult(sc)
	if err != nil {
		return nil, err
	}
	s.kx = &keyExchange{scalar: sc}
	var other *nistec.P256Point
	if s.role == Prover {
		var nonce [32]byte
		if _, err := io.ReadFull(s.rand, nonce[:]); err != nil {
			return nil, err
		}
		c := s.digest("key share commitment", mine.Bytes(), nonce[:])
		if err := s.send(tKeyCommit, c[:]); err != nil {
			return nil, err
		}
		msg, err := s.recv(ctx, tKeyShare)
		if err != nil {
			return nil, err
		}
		if other, err = parseP256(msg); err != nil {
			return nil, err
		}
		s.kx.pubN = other
		if err := s.send(tKeyOpen, append(mine.Bytes(), nonce[:]...)); err != nil {
			return nil, err
		}
	} else {
		c, err := s.recv(ctx, tKeyCommit)
		if err != nil {
			return nil, err
		}
		if len(c) != 32 {
			return nil, fmt.Errorf("%w: key share commitment of %d bytes", ErrProtocol, len(c))
		}
		if err := s.send(tKeyShare, mine.Bytes()); err != nil {
			return nil, err
		}
		s.kx.pubN = mine
		msg, err := s.recv(ctx, tKeyOpen)
		if err != nil {
			return nil, err
		}
		if len(msg) != 65+32 {
			return nil, fmt.Errorf("%w: key share opening of %d bytes", ErrProtocol, len(msg))
		}
		if other, err = parseP256(msg[:65]); err != nil {
			return nil, err
		}
		if want := s.digest("key share commitment", msg[:65], msg[65:]); string(want[:]) != string(c) {
			return nil, fmt.Errorf("%w: the prover's key share is not the one it committed to", ErrCheat)
		}
	}
	sum := nistec.NewP256Point().Add(mine, other)
	if sum.IsInfinity() == 1 {
		return nil, fmt.Errorf("%w: the key shares cancel", ErrCheat)
	}
	return sum.Bytes(), nil
}

func parseP256(b []byte) (*nistec.P256Point, error) {
	if len(b) != 65 || b[0] != 4 {
		return nil, fmt.Errorf("%w: not an uncompressed P-256 point", ErrProtocol)
	}
	p, err := nistec.NewP256Point().SetBytes(b)
	if err != nil || p.IsInfinity() == 1 {
		return nil, fmt.Errorf("%w: not a P-256 point", ErrProtocol)
	}
	return p, nil
}

// ECDH computes the ECDHE secret of the session's key share with the
// server's share (65 bytes, uncompressed P-256) and returns its
// x-coordinate, the TLS pre-master secret, as a 256-bit Value (big-endian
// bytes) that neither party learns: the conversion of package ectf gives
// each party an additive share mod p, and a circuit adds them. One per
// session, after KeyShare.
func (s *Session) ECDH(ctx context.Context, serverShare []byte) (Value, error) {
	if err := s.live(); err != nil {
		return Value{}, err
	}
	if s.kx == nil || s.kx.ran {
		return Value{}, fmt.Errorf("%w: ECDH needs one KeyShare before it, and runs once", ErrUsage)
	}
	srv, err := parseP256(serverShare)
	if err != nil {
		return Value{}, fmt.Errorf("%w: server share: %v", ErrUsage, err)
	}
	v, err := s.ecdh(ctx, srv)
	if err != nil {
		return Value{}, s.fail(err)
	}
	return v, nil
}

func (s *Session) ecdh(ctx context.Context, srv *nistec.P256Point) (Value, error) {
	kx := s.kx
	kx.ran, kx.server = true, srv
	pt, err := nistec.NewP256Point().ScalarMult(srv, kx.scalar)
	if err != nil {
		return Value{}, err
	}
	x, y, err := ectf.Point(pt)
	if err != nil {
		return Value{}, err
	}
	first, err := s.reserve(ctx, false, ectf.OTs)
	if err != nil {
		return Value{}, err
	}
	domain := s.digest("ectf")
	var share [32]byte
	if s.role == Prover {
		cots := make([]ectf.COT, ectf.OTs)
		for k := range cots {
			j := first + k
			cots[k] = ectf.COT{Index: uint64(j), Choice: s.poolB.r[j], T: s.poolB.t[j]}
		}
		p, flips, err := ectf.NewProver(s.rand, domain[:], x, y, cots)
		if err != nil {
			return Value{}, err
		}
		kx.prover = p
		if err := s.send(tECtF, flips); err != nil {
			return Value{}, err
		}
		m1, err := s.recv(ctx, tECtF)
		if err != nil {
			return Value{}, err
		}
		w, err := p.Second(m1)
		if err != nil {
			return Value{}, protocolErr(err)
		}
		if err := s.send(tECtF, w); err != nil {
			return Value{}, err
		}
		m2, err := s.recv(ctx, tECtF)
		if err != nil {
			return Value{}, err
		}
		if share, err = p.Finish(m2); err != nil {
			return Value{}, protocolErr(err)
		}
	} else {
		idx := make([]uint64, ectf.OTs)
		for k := range idx {
			idx[k] = uint64(first + k)
		}
		n, err := ectf.NewNotary(domain[:], x, y, [2]uint64(s.deltaB), s.poolB.q[first:first+ectf.OTs], idx)
		if err != nil {
			return Value{}, err
		}
		flips, err := s.recv(ctx, tECtF)
		if err != nil {
			return Value{}, err
		}
		m1, err := n.First(flips)
		if err != nil {
			return Value{}, protocolErr(err)
		}
		if err := s.send(tECtF, m1); err != nil {
			return Value{}, err
		}
		w, err := s.recv(ctx, tECtF)
		if err != nil {
			return Value{}, err
		}
		var m2 []byte
		if m2, share, err = n.Second(w); err != nil {
			return Value{}, protocolErr(err)
		}
		if s.cheat != nil && s.cheat.ectfShare != nil {
			s.cheat.ectfShare(&share)
		}
		if err := s.send(tECtF, m2); err != nil {
			return Value{}, err
		}
	}
	var mineP, mineN []byte
	if s.role == Prover {
		mineP = share[:]
	} else {
		mineN = share[:]
	}
	vP, err := s.InputValue(ctx, Prover, 256, mineP)
	if err != nil {
		return Value{}, err
	}
	vN, err := s.InputValue(ctx, Notary, 256, mineN)
	if err != nil {
		return Value{}, err
	}
	kx.sNInput = vN.input - 1
	if s.addMod == nil {
		b := circuit.NewBuilder()
		xs, ys := b.Input(256), b.Input(256)
		pb := ectf.P()
		b.Output(b.AddMod(xs, ys, pb[:]))
		if s.addMod, err = b.Build(); err != nil {
			return Value{}, err
		}
	}
	out, err := s.Call(ctx, s.addMod, vP, vN)
	if err != nil {
		return Value{}, err
	}
	return out[0], nil
}
