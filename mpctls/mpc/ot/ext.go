package ot

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"io"
)

// Kappa is the computational security parameter and the number of base
// OTs of an extension.
const Kappa = 128

// checkOTs is the number of extra OTs of every batch that the KOS check
// consumes to hide the receiver's choices (κ + s with s = 128).
const checkOTs = 256

// MaxBatch bounds the number of correlated OTs of one extension batch.
const MaxBatch = 1 << 20

// padded returns the number of OTs a batch of n really extends: n rounded
// up to whole 64-bit words, plus the check's.
func padded(n int) int { return (n+63)/64*64 + checkOTs }

// USize returns the size of the receiver's matrix message for a batch of
// n correlated OTs: κ rows of the padded batch's bits, 16 bytes per OT.
func USize(n int) int { return Kappa * padded(n) / 8 }

// ChallengeSize and ResponseSize are the sizes of the KOS check's two
// messages.
const (
	ChallengeSize = 16
	ResponseSize  = 32
)

// challenges expands the sender's challenge seed into one χ per OT.
func challenges(seed []byte, n int) []Block {
	c, err := aes.NewCipher(seed)
	if err != nil {
		panic(err)
	}
	buf := make([]byte, 16*n)
	var iv [16]byte
	cipher.NewCTR(c, iv[:]).XORKeyStream(buf, buf)
	out := make([]Block, n)
	for j := range out {
		out[j] = BlockOf(buf[16*j:])
	}
	return out
}

// Sender is the sender of IKNP correlated OT extension with the KOS
// consistency check (Ishai, Kilian, Nissim, Petrank, CRYPTO 2003; Keller,
// Orsini, Scholl: "Actively Secure OT Extension with Optimal Overhead",
// CRYPTO 2015; Roy's SoftSpokenOT, CRYPTO 2022, revisits its analysis). It holds the
// correlation Δ: for every OT j it obtains q_j, and the receiver obtains
// its random choice r_j and t_j = q_j ⊕ r_j·Δ. A receiver that deviates
// (inconsistent choices across the matrix, to learn bits of Δ) fails the
// check except with probability about 2⁻⁶⁴ per bit it tries to learn. A
// Sender is not safe for concurrent use.
type Sender struct {
	delta Block
	seeds [Kappa]Seed
	batch uint64
	// the batch between Expand and Check
	n      int
	q      []Block
	chi    []Block
	active bool
}

// NewSender returns the sender of the extension whose base OTs gave it
// seeds[i] for choice bit i of delta (it was the base OTs' receiver).
func NewSender(delta Block, seeds []Seed) (*Sender, error) {
	if len(seeds) != Kappa {
		return nil, fmt.Errorf("%w: %d base seeds", ErrState, len(seeds))
	}
	s := &Sender{delta: delta}
	copy(s.seeds[:], seeds)
	return s, nil
}

// Delta returns the sender's correlation.
func (s *Sender) Delta() Block { return s.delta }

// DeltaChoices returns the bits of delta as base OT choices.
func DeltaChoices(delta Block) []bool {
	c := make([]bool, Kappa)
	for i := range c {
		c[i] = delta[i/64]>>(i%64)&1 == 1
	}
	return c
}

// Expand takes the receiver's matrix for a batch of n OTs and returns the
// check's challenge, drawn from r, to send back.
func (s *Sender) Expand(u []byte, n int, r io.Reader) ([]byte, error) {
	if s.active {
		return nil, fmt.Errorf("%w: a batch is already being extended", ErrState)
	}
	if n <= 0 || n > MaxBatch {
		return nil, fmt.Errorf("%w: batch of %d OTs", ErrState, n)
	}
	np := padded(n)
	if len(u) != USize(n) {
		return nil, fmt.Errorf("%w: matrix of %d bytes for %d OTs", ErrMessage, len(u), n)
	}
	row := np / 8
	var rows [Kappa][]byte
	for i := 0; i < Kappa; i++ {
		rows[i] = make([]byte, row)
		prg(s.seeds[i], s.batch, rows[i])
		// q_i = G(k_i^{Δ_i}) ⊕ Δ_i·u_i, in constant time.
		m := -byte(s.delta[i/64] >> (i % 64) & 1)
		ui := u[i*row : (i+1)*row]
		for j := range rows[i] {
			rows[i][j] ^= ui[j] & m
		}
	}
	s.batch++
	s.q = transpose(&rows, np)
	s.n = n
	chal := make([]byte, ChallengeSize)
	if _, err := io.ReadFull(r, chal); err != nil {
		return nil, err
	}
	s.chi = challenges(chal, np)
	s.active = true
	return chal, nil
}

// Check verifies the receiver's response to the challenge and returns the
// batch's q_j (the messages for choice 0; those for choice 1 are q_j ⊕ Δ).
// On failure the batch is discarded and the error wraps ErrConsistency.
func (s *Sender) Check(resp []byte) ([]Block, error) {
	if !s.active {
		return nil, fmt.Errorf("%w: no batch to check", ErrState)
	}
	s.active = false
	if len(resp) != ResponseSize {
		return nil, fmt.Errorf("%w: check response of %d bytes", ErrMessage, len(resp))
	}
	x, t := BlockOf(resp), BlockOf(resp[16:])
	var acc gf128
	for j, q := range s.q {
		acc.mulAdd(s.chi[j], q)
	}
	want := t.Xor(mul(x, s.delta))
	if acc.reduce() != want {
		return nil, fmt.Errorf("%w: the receiver's choices are inconsistent", ErrConsistency)
	}
	q := s.q[:s.n]
	s.q, s.chi = nil, nil
	return q, nil
}

// Receiver is the receiver of the correlated OT extension (see Sender). It
// chooses its choice bits at random; callers derandomize them (send
// c ⊕ r_j). A Receiver is not safe for concurrent use.
type Receiver struct {
	seeds [Kappa][2]Seed
	batch uint64
	// the batch between Extend and Respond
	n      int
	r      []bool
	t      []Block
	active bool
}

// NewReceiver returns the receiver of the extension whose base OTs it
// sent (it holds both seeds of each).
func NewReceiver(seeds [][2]Seed) (*Receiver, error) {
	if len(seeds) != Kappa {
		return nil, fmt.Errorf("%w: %d base seed pairs", ErrState, len(seeds))
	}
	rc := &Receiver{}
	copy(rc.seeds[:], seeds)
	return rc, nil
}

// Extend starts a batch of n correlated OTs with random choices drawn from
// rnd and returns the matrix message for the sender.
func (rc *Receiver) Extend(n int, rnd io.Reader) ([]byte, error) {
	if rc.active {
		return nil, fmt.Errorf("%w: a batch is already being extended", ErrState)
	}
	if n <= 0 || n > MaxBatch {
		return nil, fmt.Errorf("%w: batch of %d OTs", ErrState, n)
	}
	np := padded(n)
	row := np / 8
	choice := make([]byte, row)
	if _, err := io.ReadFull(rnd, choice); err != nil {
		return nil, err
	}
	u := make([]byte, Kappa*row)
	var rows [Kappa][]byte
	g1 := make([]byte, row)
	for i := 0; i < Kappa; i++ {
		rows[i] = make([]byte, row)
		prg(rc.seeds[i][0], rc.batch, rows[i])
		prg(rc.seeds[i][1], rc.batch, g1)
		ui := u[i*row : (i+1)*row]
		for j := range ui {
			ui[j] = rows[i][j] ^ g1[j] ^ choice[j]
		}
	}
	rc.batch++
	rc.t = transpose(&rows, np)
	rc.r = make([]bool, np)
	for j := range rc.r {
		rc.r[j] = choice[j/8]>>(j%8)&1 == 1
	}
	rc.n = n
	rc.active = true
	return u, nil
}

// Respond answers the sender's challenge and returns the response message
// and the batch: the random choice r_j and t_j = q_j ⊕ r_j·Δ of each OT.
func (rc *Receiver) Respond(challenge []byte) (resp []byte, r []bool, t []Block, err error) {
	if !rc.active {
		return nil, nil, nil, fmt.Errorf("%w: no batch to answer for", ErrState)
	}
	rc.active = false
	if len(challenge) != ChallengeSize {
		return nil, nil, nil, fmt.Errorf("%w: challenge of %d bytes", ErrMessage, len(challenge))
	}
	chi := challenges(challenge, len(rc.t))
	var x Block
	var acc gf128
	for j, tj := range rc.t {
		bit := uint64(0)
		if rc.r[j] {
			bit = 1
		}
		x = x.Xor(chi[j].mask(bit))
		acc.mulAdd(chi[j], tj)
	}
	tt := acc.reduce()
	xb, tb := x.Bytes(), tt.Bytes()
	resp = append(xb[:], tb[:]...)
	r, t = rc.r[:rc.n], rc.t[:rc.n]
	rc.r, rc.t = nil, nil
	return resp, r, t, nil
}
