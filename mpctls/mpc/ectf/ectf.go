package ectf

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"

	"filippo.io/nistec"

	"github.com/acds-project/acds/mpctls/mpc/ot"
)

// Errors of the protocol. Each error wraps one of them.
var (
	// ErrMessage reports a message of the wrong size or with a field
	// element that is not reduced.
	ErrMessage = errors.New("ectf: malformed message")
	// ErrPoint reports a point that is not on P-256 or is at infinity.
	ErrPoint = errors.New("ectf: invalid point")
	// ErrState reports a call out of the protocol's order.
	ErrState = errors.New("ectf: call out of order")
	// ErrCheat reports a notary whose opened transcript does not match
	// the messages it sent.
	ErrCheat = errors.New("ectf: the notary deviated from the protocol")
)

// bits is the size of a field element in bits, the OTs of one
// multiplication.
const bits = 256

// OTs is the number of correlated OTs one conversion consumes: three
// multiplications of 256 OTs each.
const OTs = 3 * bits

// Message sizes.
const (
	ProverFlipsSize   = 3 * bits / 8 // the prover's derandomized choices
	NotaryFirstSize   = 2 * bits * 32
	ProverSecondSize  = 2 * 32
	NotarySecondSize  = bits * 32
	mtaX, mtaY, mtaM  = 0, 1, 2
	padSize           = 64
	multiplicationOTs = bits
)

// Point returns the affine coordinates of a point, or ErrPoint for the
// point at infinity.
func Point(p *nistec.P256Point) (x, y [32]byte, err error) {
	raw := p.Bytes()
	if len(raw) != 65 {
		return x, y, fmt.Errorf("%w: point at infinity", ErrPoint)
	}
	copy(x[:], raw[1:33])
	copy(y[:], raw[33:65])
	return x, y, nil
}

// pad derives the random-OT pad of correlated OT j.
func pad(domain []byte, j uint64, b ot.Block) fe {
	var out [padSize]byte
	ot.Pad(domain, j, b, out[:])
	return feFromPad(out[:])
}

// COT is the receiver's side of one correlated OT: its random choice and
// t = q ⊕ choice·Δ, and the OT's index in its instance (which keeps the
// pads of different OTs apart).
type COT struct {
	Index  uint64
	Choice bool
	T      ot.Block
}

// Prover is P's side of the conversion of x(P₁ + P₂) into additive shares
// mod p, where P holds P₁ = (xp, yp) and the notary P₂ = (xq, yq):
//
//	A2M: rx·(xq - xp) to N, rx⁻¹ to P; ry·(yq - yp) to N, ry⁻¹ to P
//	local: C_P = (rx/ry)²,  C_N = (ry/rx)²·λ²  with λ = (yq-yp)/(xq-xp)
//	M2A: C_P·C_N = λ² as u + v
//	shares: s_P = v - xp,  s_N = u - xq;  s_P + s_N = λ² - xp - xq = x(P₁+P₂).
//
// Each multiplication is Gilboa's (CRYPTO 1999) from 256 correlated OTs
// in which P is the receiver, choosing with the bits of its random mask
// (rx, ry, then C_P) and N sends the corrections of its values (xq, yq,
// C_N). P's coordinates never enter an OT: they appear only in P's local
// share and, under a fresh multiplicative mask, in w = r·(-xp) + v. A
// deviating N can therefore bias only what P computes from its masks; it
// learns bits of them only through a failed handshake (an abort), and the
// Prover replays N's whole part once N opens it (VerifyNotary).
type Prover struct {
	domain     []byte
	xp, yp     fe
	rx, ry, cp fe
	cots       []COT
	stage      int
	vx, vy     fe
	first      []byte
	second     []byte
	flips      []byte
	w          []byte
	share      fe
}

// NewProver starts the conversion for P's point (xp, yp) with OTS
// correlated OTs (the prover is their receiver), masks drawn from r, and
// a domain separating this session's pads.
func NewProver(r io.Reader, domain []byte, xp, yp [32]byte, cots []COT) (*Prover, []byte, error) {
	if len(cots) != OTs {
		return nil, nil, fmt.Errorf("%w: %d correlated OTs, want %d", ErrState, len(cots), OTs)
	}
	x, err := feOf(xp[:])
	if err != nil {
		return nil, nil, fmt.Errorf("%w: coordinate", ErrPoint)
	}
	y, err := feOf(yp[:])
	if err != nil {
		return nil, nil, fmt.Errorf("%w: coordinate", ErrPoint)
	}
	p := &Prover{domain: append([]byte(nil), domain...), xp: x, yp: y, cots: append([]COT(nil), cots...)}
	if p.rx, err = randomNonZero(r); err != nil {
		return nil, nil, err
	}
	if p.ry, err = randomNonZero(r); err != nil {
		return nil, nil, err
	}
	p.cp = square(mul(p.rx, inv(p.ry)))
	// Derandomize: flip bit = the multiplicand's bit ⊕ the OT's random
	// choice.
	flips := make([]byte, ProverFlipsSize)
	for m, v := range []fe{p.rx, p.ry, p.cp} {
		vb := feBytes(v)
		for i := 0; i < bits; i++ {
			k := m*bits + i
			c := 0
			if p.cots[k].Choice {
				c = 1
			}
			flips[k/8] |= byte((bit(vb, i)^c)&1) << (k % 8)
		}
	}
	p.flips = flips
	p.stage = 1
	return p, append([]byte(nil), flips...), nil
}

func randomNonZero(r io.Reader) (fe, error) {
	var b [64]byte
	for {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		x := feFromPad(b[:])
		if x.IsZero() == 0 {
			return x, nil
		}
	}
}

// receive computes the receiver's output of multiplication m from the
// notary's corrections: Σ_i (pad_i - β_i·e_i), with β the multiplicand.
func (p *Prover) receive(m int, beta fe, corr []byte) (fe, error) {
	bb := feBytes(beta)
	sum := feZero()
	for i := 0; i < bits; i++ {
		e, err := feOf(corr[32*i : 32*i+32])
		if err != nil {
			return nil, err
		}
		c := p.cots[m*bits+i]
		pd := pad(p.domain, c.Index, c.T)
		sum = add(sum, selectFe(bit(bb, i), pd, sub(pd, e)))
	}
	return sum, nil
}

// Second takes the notary's first message (the corrections of xq and yq)
// and returns P's second message, the masked differences w.
func (p *Prover) Second(msg []byte) ([]byte, error) {
	if p.stage != 1 {
		return nil, fmt.Errorf("%w: Second", ErrState)
	}
	p.stage = -1
	if len(msg) != NotaryFirstSize {
		return nil, fmt.Errorf("%w: notary's first message of %d bytes", ErrMessage, len(msg))
	}
	vx, err := p.receive(mtaX, p.rx, msg[:bits*32])
	if err != nil {
		return nil, err
	}
	vy, err := p.receive(mtaY, p.ry, msg[bits*32:])
	if err != nil {
		return nil, err
	}
	wx := add(mul(p.rx, neg(p.xp)), vx)
	wy := add(mul(p.ry, neg(p.yp)), vy)
	p.first = append([]byte(nil), msg...)
	p.w = append(feBytes(wx), feBytes(wy)...)
	p.stage = 2
	return append([]byte(nil), p.w...), nil
}

// Finish takes the notary's second message (the corrections of C_N) and
// returns P's share s_P of x(P₁ + P₂), 32 bytes big-endian.
func (p *Prover) Finish(msg []byte) ([32]byte, error) {
	var out [32]byte
	if p.stage != 2 {
		return out, fmt.Errorf("%w: Finish", ErrState)
	}
	p.stage = -1
	if len(msg) != NotarySecondSize {
		return out, fmt.Errorf("%w: notary's second message of %d bytes", ErrMessage, len(msg))
	}
	v, err := p.receive(mtaM, p.cp, msg)
	if err != nil {
		return out, err
	}
	p.second = append([]byte(nil), msg...)
	p.share = sub(v, p.xp)
	copy(out[:], feBytes(p.share))
	p.stage = 3
	return out, nil
}

// VerifyNotary replays the notary's part once it has opened it: the
// correlation delta of the OTs, its point (xq, yq) and the share sN it
// claims. It checks that every correction the notary sent is the honest
// one for those values and that sN is the share the honest protocol gives
// it; otherwise ErrCheat. With the prover's own share this also shows
// s_P + s_N = x(P₁ + P₂).
func (p *Prover) VerifyNotary(delta ot.Block, xq, yq, sN [32]byte) error {
	if p.stage != 3 {
		return fmt.Errorf("%w: VerifyNotary before Finish", ErrState)
	}
	x, err := feOf(xq[:])
	if err != nil {
		return fmt.Errorf("%w: opened coordinate", ErrCheat)
	}
	y, err := feOf(yq[:])
	if err != nil {
		return fmt.Errorf("%w: opened coordinate", ErrCheat)
	}
	n := &Notary{domain: p.domain, xq: x, yq: y, delta: delta, q: make([]ot.Block, OTs), index: make([]uint64, OTs)}
	for k, c := range p.cots {
		n.q[k] = c.T.Xor(blockMask(delta, c.Choice))
		n.index[k] = c.Index
	}
	n.stage = 1
	first, err := n.First(p.flips)
	if err != nil {
		return err
	}
	second, share, err := n.Second(p.w)
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(first, p.first) != 1 || subtle.ConstantTimeCompare(second, p.second) != 1 {
		return fmt.Errorf("%w: its corrections are not those of its opened values", ErrCheat)
	}
	if share != sN {
		return fmt.Errorf("%w: its share is not the protocol's", ErrCheat)
	}
	return nil
}

func blockMask(d ot.Block, c bool) ot.Block {
	if c {
		return d
	}
	return ot.Block{}
}

// Notary is N's side of the conversion (see Prover): the sender of the
// three multiplications.
type Notary struct {
	domain []byte
	xq, yq fe
	delta  ot.Block
	q      []ot.Block
	index  []uint64
	flips  []byte
	ux, uy fe
	stage  int
}

// NewNotary starts N's side for its point (xq, yq), with the correlated
// OTs of which it is the sender: q[k] for OT index[k], correlation delta.
func NewNotary(domain []byte, xq, yq [32]byte, delta ot.Block, q []ot.Block, index []uint64) (*Notary, error) {
	if len(q) != OTs || len(index) != OTs {
		return nil, fmt.Errorf("%w: %d correlated OTs, want %d", ErrState, len(q), OTs)
	}
	x, err := feOf(xq[:])
	if err != nil {
		return nil, fmt.Errorf("%w: coordinate", ErrPoint)
	}
	y, err := feOf(yq[:])
	if err != nil {
		return nil, fmt.Errorf("%w: coordinate", ErrPoint)
	}
	return &Notary{domain: append([]byte(nil), domain...), xq: x, yq: y, delta: delta,
		q: append([]ot.Block(nil), q...), index: append([]uint64(nil), index...), stage: 1}, nil
}

// send returns the corrections of multiplication m for the notary's
// value alpha and its own output -Σ s_i.
func (n *Notary) send(m int, alpha fe) ([]byte, fe) {
	out := make([]byte, 0, bits*32)
	sum := feZero()
	a := feCopy(alpha)
	for i := 0; i < bits; i++ {
		k := m*bits + i
		f := n.flips[k/8]>>(k%8)&1 == 1
		idx := n.index[k]
		p0 := pad(n.domain, idx, n.q[k])
		p1 := pad(n.domain, idx, n.q[k].Xor(n.delta))
		// The pad of choice 0 is P_f, that of choice 1 is P_{1⊕f}; f is
		// public (a uniformly random bit), so branching on it leaks
		// nothing.
		s, o := p0, p1
		if f {
			s, o = p1, p0
		}
		e := sub(sub(o, s), a)
		out = append(out, feBytes(e)...)
		sum = add(sum, s)
		a = double(a)
	}
	return out, neg(sum)
}

// First takes P's derandomized choices and returns N's first message: the
// corrections of xq and yq.
func (n *Notary) First(flips []byte) ([]byte, error) {
	if n.stage != 1 {
		return nil, fmt.Errorf("%w: First", ErrState)
	}
	n.stage = -1
	if len(flips) != ProverFlipsSize {
		return nil, fmt.Errorf("%w: prover's choices of %d bytes", ErrMessage, len(flips))
	}
	n.flips = append([]byte(nil), flips...)
	cx, ux := n.send(mtaX, n.xq)
	cy, uy := n.send(mtaY, n.yq)
	n.ux, n.uy = ux, uy
	n.stage = 2
	return append(cx, cy...), nil
}

// Second takes P's masked differences and returns N's second message (the
// corrections of C_N) and N's share s_N, 32 bytes big-endian.
func (n *Notary) Second(msg []byte) ([]byte, [32]byte, error) {
	var out [32]byte
	if n.stage != 2 {
		return nil, out, fmt.Errorf("%w: Second", ErrState)
	}
	n.stage = -1
	if len(msg) != ProverSecondSize {
		return nil, out, fmt.Errorf("%w: prover's second message of %d bytes", ErrMessage, len(msg))
	}
	wx, err := feOf(msg[:32])
	if err != nil {
		return nil, out, err
	}
	wy, err := feOf(msg[32:])
	if err != nil {
		return nil, out, err
	}
	bN := add(wx, n.ux) // rx·(xq - xp)
	aN := add(wy, n.uy) // ry·(yq - yp)
	cN := square(mul(aN, inv(bN)))
	corr, u := n.send(mtaM, cN)
	copy(out[:], feBytes(sub(u, n.xq)))
	n.stage = 3
	return corr, out, nil
}
