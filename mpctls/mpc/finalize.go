package mpc

import (
	"context"
	"crypto/aes"
	"crypto/subtle"
	"fmt"
	"io"
	"sync"

	"filippo.io/nistec"

	"github.com/acds-project/acds/mpctls/mpc/ectf"
	"github.com/acds-project/acds/mpctls/mpc/garble"
	"github.com/acds-project/acds/mpctls/mpc/ot"
)

// Finalize ends the computation with the proof that makes it
// malicious-secure. The notary reveals its inputs (and its ECDHE scalar)
// and the prover proves, with the notary's privacy-free garbling of every
// call, that every value opened during the session is the circuits'
// output on the prover's inputs (fixed when it assigned them) and the
// notary's; the notary then opens its garbling and its OTs, and the prover
// checks them before it opens its proof, so that nothing it sends depends
// on its inputs unless the notary was honest.
//
// On the notary, nil means every opened value was right: it may sign. On
// the prover, nil means the notary's garbling, OTs and ECDH part were
// honest; the prover has learnt the notary's inputs, hence every secret of
// the session. Every input must be assigned. After Finalize the session
// only closes.
func (s *Session) Finalize(ctx context.Context) error {
	if err := s.live(); err != nil {
		return err
	}
	for _, in := range s.inputs {
		if !in.assigned {
			return fmt.Errorf("%w: Finalize with an input not assigned", ErrUsage)
		}
	}
	var err error
	if s.role == Prover {
		err = s.finalizeProver(ctx)
	} else {
		err = s.finalizeNotary(ctx)
	}
	if err != nil {
		return s.fail(err)
	}
	s.ended = true
	s.stopWorker()
	s.t.close()
	return nil
}

// notaryInputBits lists N's input bits in declaration order.
func (s *Session) notaryInputBits() []uint32 {
	var out []uint32
	for _, in := range s.inputs {
		if in.owner == Notary {
			out = append(out, in.bits...)
		}
	}
	return out
}

func (s *Session) finalizeNotary(ctx context.Context) error {
	if err := s.drain(ctx); err != nil {
		return err
	}
	var r finalReveal
	var gaLabels []garble.Label
	for _, in := range s.inputs {
		if in.owner != Notary {
			continue
		}
		for i, w := range in.bits {
			a, err := s.active(ctx, w)
			if err != nil {
				return err
			}
			gaLabels = append(gaLabels, a)
			r.values = append(r.values, in.value[i])
			r.gbLabel = append(r.gbLabel, s.bits[w].b0.Select(b2u(in.value[i]), s.deltaB))
		}
	}
	r.gaHash = s.digest("final ga labels", putLabels(nil, gaLabels))
	if s.kx != nil {
		r.scalar = s.kx.scalar
	}
	if s.cheat != nil && s.cheat.reveal != nil {
		s.cheat.reveal(&r)
	}
	if err := s.send(tFinalReveal, putFinalReveal(r)); err != nil {
		return err
	}
	commit, err := s.recv(ctx, tFinalCommit)
	if err != nil {
		return err
	}
	if len(commit) != 32 {
		return fmt.Errorf("%w: commitment of %d bytes", ErrProtocol, len(commit))
	}
	open := make([]byte, 0, finalOpenSize)
	db := s.deltaB.Bytes()
	open = append(open, db[:]...)
	open = append(open, s.seedB[:]...)
	for _, sd := range s.baseSeedsB {
		open = append(open, sd[:]...)
	}
	if s.cheat != nil && s.cheat.open != nil {
		s.cheat.open(open)
	}
	if err := s.send(tFinalOpen, open); err != nil {
		return err
	}
	proof, err := s.recv(ctx, tFinalProof)
	if err != nil {
		return err
	}
	if len(proof) != finalProofSize {
		return fmt.Errorf("%w: proof of %d bytes", ErrProtocol, len(proof))
	}
	// The labels an honest prover obtained: those of the opened values.
	var want []garble.Label
	for _, d := range s.decodes {
		for i, w := range d.bits {
			l, err := s.zeroLabel(w)
			if err != nil {
				return err
			}
			want = append(want, l.Select(b2u(d.values[i]), s.deltaB))
		}
	}
	h := s.digest("final proof labels", putLabels(nil, want))
	c := s.digest("final commitment", proof[:32], proof[32:])
	if subtle.ConstantTimeCompare(c[:], commit) != 1 {
		return fmt.Errorf("%w: the proof is not the one the prover committed to", ErrCheat)
	}
	if subtle.ConstantTimeCompare(h[:], proof[32:]) != 1 {
		return fmt.Errorf("%w: an opened value is not the circuits' output on the inputs", ErrCheat)
	}
	return s.send(tFinalAccept, []byte("accept"))
}

func (s *Session) finalizeProver(ctx context.Context) error {
	if err := s.drain(ctx); err != nil {
		return err
	}
	nBits := s.notaryInputBits()
	msg, err := s.recv(ctx, tFinalReveal)
	if err != nil {
		return err
	}
	r, err := parseFinalReveal(msg, len(nBits), s.kx != nil)
	if err != nil {
		return err
	}
	// N's values must be those its GA labels carry (it holds one label
	// per input bit, of its OT choice).
	ga := make([]garble.Label, len(nBits))
	for i, w := range nBits {
		ga[i] = s.bits[w].a0.Select(b2u(r.values[i]), s.deltaA)
	}
	if h := s.digest("final ga labels", putLabels(nil, ga)); subtle.ConstantTimeCompare(h[:], r.gaHash[:]) != 1 && (s.cheat == nil || !s.cheat.ignore) {
		return fmt.Errorf("%w: the notary's revealed inputs are not those it evaluated on", ErrCheat)
	}
	k := 0
	for _, in := range s.inputs {
		if in.owner == Notary {
			in.value = r.values[k : k+len(in.bits)]
			k += len(in.bits)
		}
	}
	// The proof: evaluate every call privacy-free on the GB tables.
	labels, values, err := s.proveAll(ctx, r.gbLabel)
	if err != nil {
		return err
	}
	var out []garble.Label
	for _, d := range s.decodes {
		for i, w := range d.bits {
			if values[w] != d.values[i] && (s.cheat == nil || !s.cheat.ignore) {
				return fmt.Errorf("mpc: internal error: decoding disagrees with the plaintext")
			}
			out = append(out, labels[w])
		}
	}
	h := s.digest("final proof labels", putLabels(nil, out))
	var nonce [32]byte
	if _, err := io.ReadFull(s.rand, nonce[:]); err != nil {
		return err
	}
	c := s.digest("final commitment", nonce[:], h[:])
	if err := s.send(tFinalCommit, c[:]); err != nil {
		return err
	}
	open, err := s.recv(ctx, tFinalOpen)
	if err != nil {
		return err
	}
	if len(open) != finalOpenSize {
		return fmt.Errorf("%w: opening of %d bytes", ErrProtocol, len(open))
	}
	// Every check below depends only on what the notary sent and opened,
	// never on the prover's inputs: a failure tells the notary nothing it
	// did not know.
	if err := s.verifyNotary(open, r, labels, values); err != nil {
		return err
	}
	if err := s.send(tFinalProof, append(nonce[:], h[:]...)); err != nil {
		return err
	}
	acc, err := s.recv(ctx, tFinalAccept)
	if err != nil {
		return err
	}
	if string(acc) != "accept" {
		return fmt.Errorf("%w: final answer", ErrProtocol)
	}
	return nil
}

// proveAll evaluates the GB garbling of every call, in order, and returns
// the active label and value of every session bit.
func (s *Session) proveAll(ctx context.Context, nLabels []garble.Label) ([]garble.Label, []bool, error) {
	labels := make([]garble.Label, len(s.bits))
	values := make([]bool, len(s.bits))
	nk := 0
	pos := make([]int, len(s.inputs)) // N inputs: position in nLabels
	for i, in := range s.inputs {
		if in.owner == Notary {
			pos[i] = nk
			nk += len(in.bits)
		}
	}
	pe := garble.NewProofEvaluator(s.hash)
	for _, cl := range s.calls {
		t, err := s.t.recvBulk(ctx, tTables, garble.PrivacyFreeGateSize*cl.c.ANDs())
		if err != nil {
			return nil, nil, err
		}
		cl.tables = t
	}
	for w := range s.bits {
		b := &s.bits[w]
		switch b.kind {
		case fromInput:
			in := s.inputs[b.src]
			i := w - int(in.bits[0])
			values[w] = in.value[i]
			switch {
			case in.owner == Prover && in.random:
				labels[w] = garble.Label(s.poolB.t[in.cot+i])
			case in.owner == Prover:
				labels[w] = garble.Label(s.poolB.t[in.cot+i]).Xor(in.corr[i])
			default:
				labels[w] = nLabels[pos[b.src]+i]
			}
		case fromXor:
			labels[w] = labels[b.x].Xor(labels[b.y])
			values[w] = values[b.x] != values[b.y]
		case fromCall:
			cl := s.calls[b.src]
			if uint32(w) != cl.first {
				continue // evaluated with its call's first output bit
			}
			in := make([]garble.Label, len(cl.args))
			iv := make([]bool, len(cl.args))
			for i, a := range cl.args {
				in[i], iv[i] = labels[a], values[a]
			}
			cl.hashes = make([]garble.Label, cl.c.ANDs())
			outs, vals, err := pe.Evaluate(cl.c, cl.base, in, iv, cl.tables, cl.hashes)
			if err != nil {
				return nil, nil, protocolErr(err)
			}
			for g := range outs {
				for i, o := range cl.outs[g] {
					labels[o], values[o] = outs[g][i], vals[g][i]
				}
			}
		}
	}
	return labels, values, nil
}

// verifyNotary checks the notary's opening: Δ_B bound by the base-OT
// seeds, its GB input labels and OT corrections, its garbling of every
// call, and its ECDH part.
func (s *Session) verifyNotary(open []byte, r finalReveal, labels []garble.Label, values []bool) error {
	deltaB := garble.LabelOf(open[:16])
	var seed [16]byte
	copy(seed[:], open[16:32])
	choices := ot.DeltaChoices(ot.Block(deltaB))
	for i := 0; i < ot.Kappa; i++ {
		var sd ot.Seed
		copy(sd[:], open[32+16*i:])
		c := 0
		if choices[i] {
			c = 1
		}
		if sd != s.basePairsB[i][c] {
			return fmt.Errorf("%w: the opened Δ is not the notary's OT correlation", ErrCheat)
		}
	}
	lb, err := aes.NewCipher(seed[:])
	if err != nil {
		return err
	}
	// Zero labels of every bit under the opened garbling.
	zero := make([]garble.Label, len(s.bits))
	nk := 0
	for _, in := range s.inputs {
		for i, w := range in.bits {
			zero[w] = gbInputLabel(lb, in.first+i)
			switch {
			case in.owner == Prover && in.random:
				// The zero label is the OT's q = t ⊕ r·Δ_B.
				zero[w] = garble.Label(s.poolB.t[in.cot+i]).Select(b2u(s.poolB.r[in.cot+i]), deltaB)
			case in.owner == Prover:
				q := garble.Label(s.poolB.t[in.cot+i]).Select(b2u(s.poolB.r[in.cot+i]), deltaB)
				if in.corr[i] != zero[w].Xor(q).Select(b2u(in.flips[i]), deltaB) {
					return fmt.Errorf("%w: an OT correction of the notary's is not the protocol's", ErrCheat)
				}
			default:
				if r.gbLabel[nk] != zero[w].Select(b2u(in.value[i]), deltaB) {
					return fmt.Errorf("%w: a proof input label of the notary's is not the protocol's", ErrCheat)
				}
				nk++
			}
		}
	}
	// Every table, checked from the evaluation's labels and values. With
	// the input labels verified above, the first call whose tables are not
	// N's honest garbling fails whatever P's inputs are, so the outcome —
	// some call failed or none did — depends only on N's view, even though
	// the calls are checked two at a time and a later call's check may see
	// labels an earlier bad call spoilt.
	errs := make([]error, len(s.calls))
	var wg sync.WaitGroup
	next := make(chan int)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				cl := s.calls[k]
				in := make([]garble.Label, len(cl.args))
				iv := make([]bool, len(cl.args))
				for i, a := range cl.args {
					in[i], iv[i] = labels[a], values[a]
				}
				errs[k] = garble.CheckProof(s.hash, cl.c, cl.base, deltaB, in, iv, cl.tables, cl.hashes)
			}
		}()
	}
	for k := range s.calls {
		next <- k
	}
	close(next)
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			return fmt.Errorf("%w: the notary's proof garbling of call %d is not the circuit's", ErrCheat, k)
		}
	}
	if s.kx != nil {
		if len(r.scalar) != 32 {
			return fmt.Errorf("%w: no ECDHE scalar", ErrCheat)
		}
		pub, err := nistec.NewP256Point().ScalarBaseMult(r.scalar)
		if err != nil || pub.Equal(s.kx.pubN) != 1 {
			return fmt.Errorf("%w: the opened scalar is not that of the notary's key share", ErrCheat)
		}
		if s.kx.ran {
			pt, err := nistec.NewP256Point().ScalarMult(s.kx.server, r.scalar)
			if err != nil {
				return err
			}
			xq, yq, err := ectf.Point(pt)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrCheat, err)
			}
			in := s.inputs[s.kx.sNInput]
			var sN [32]byte
			copy(sN[:], boolBytes(in.value))
			if err := s.kx.prover.VerifyNotary(ot.Block(deltaB), xq, yq, sN); err != nil {
				return fmt.Errorf("%w: %v", ErrCheat, err)
			}
		}
	}
	return nil
}

func boolBytes(bits []bool) []byte {
	out := make([]byte, (len(bits)+7)/8)
	for i, b := range bits {
		if b {
			out[i/8] |= 1 << (7 - i%8)
		}
	}
	return out
}
