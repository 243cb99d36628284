package mpctls

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"runtime"
	"sync"
)

// Presentation limits.
const (
	// MaxPresentationSize bounds an encoded presentation accepted by
	// Unmarshal.
	MaxPresentationSize = 64 << 20
	// maxEpochs bounds the number of key epochs (KeyUpdates) one
	// presentation may span.
	maxEpochs = 1 << 16
)

var presCodec = newCodec(MaxPresentationSize / 8)

// Presentation lets a holder of data fetched through a notarized session
// show some of the server's records to anyone, who can check them offline
// against the notary's statement: every disclosed record is proven to be
// in the notarized transcript by a Merkle inclusion proof, and its AEAD
// tag is re-checked with the disclosed server key. Records left out stay
// secret and are still committed to by the root.
//
// A presentation contains server-direction secrets only. Its Secret opens
// every server record from EpochStarts[0] on; it never opens anything the
// client sent. Selective disclosure therefore rests on the undisclosed
// ciphertext staying private: the statement holds only its hashes, and a
// notary should not keep the records once it has signed.
//
// Size: the disclosed records plus, per record, a few integers and
// ⌈log2 n⌉ hashes of 32 bytes for a session of n records: a few hundred
// bytes per 16 KiB record, about 2% for a 10 MB response.
type Presentation struct {
	// StatementDigest is SHA-256 of the signed statement the presentation
	// is for.
	StatementDigest [32]byte `cbor:"1,keyasint"`
	// Secret is, for TLS 1.3, the server application traffic secret in
	// force from EpochStarts[0]; for TLS 1.2, the server write key followed
	// by the server write IV (see ServerWriteKey12).
	Secret []byte `cbor:"2,keyasint"`
	// EpochStarts are the server-direction sequence numbers at which each
	// key epoch starts, strictly increasing. Epoch i+1 (after a server
	// KeyUpdate) uses NextTrafficSecret of epoch i's secret; record number
	// s of epoch i has nonce sequence number s - EpochStarts[i]. TLS 1.2
	// has exactly one epoch, starting at the record after the server's
	// ChangeCipherSpec.
	EpochStarts []uint64 `cbor:"3,keyasint"`
	// Records are the disclosed server records in increasing Seq order.
	Records []PresentedRecord `cbor:"4,keyasint"`
}

// PresentedRecord is one disclosed server record with its inclusion proof.
type PresentedRecord struct {
	Seq   uint64 `cbor:"1,keyasint"` // server-direction sequence number
	Raw   []byte `cbor:"2,keyasint"` // the record as on the wire (ciphertext)
	Proof Proof  `cbor:"3,keyasint"` // inclusion in the statement's Merkle tree
}

// Marshal encodes p as deterministic CBOR.
func (p *Presentation) Marshal() ([]byte, error) {
	b, err := presCodec.enc.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPresentation, err)
	}
	return b, nil
}

// Unmarshal decodes a presentation produced by Marshal, refusing inputs
// above MaxPresentationSize, unknown fields and non-canonical encodings.
// It checks the form only; VerifyPresentation checks the content.
func (p *Presentation) Unmarshal(b []byte) error {
	if len(b) > MaxPresentationSize {
		return fmt.Errorf("%w: presentation of %d bytes (limit %d)", ErrTooLarge, len(b), MaxPresentationSize)
	}
	var q Presentation
	if err := presCodec.decodeCanonical(b, &q, ErrPresentation); err != nil {
		return err
	}
	*p = q
	return nil
}

// Disclosed is the verified content of a presentation.
type Disclosed struct {
	// Statement is the verified notary statement.
	Statement *Statement
	// Records are the disclosed records in order, decrypted.
	Records []DisclosedRecord
	// Complete reports that the disclosed records are every server record
	// from the first key epoch to the end of the session, with no gap.
	Complete bool
	// CloseNotify reports that a disclosed record is the server's
	// close_notify alert, so a Complete disclosure was not truncated.
	CloseNotify bool
}

// DisclosedRecord is one verified, decrypted server record.
type DisclosedRecord struct {
	Seq       uint64 // server-direction sequence number
	Epoch     int    // index into Presentation.EpochStarts
	Type      uint8  // true content type: application data, handshake (e.g. NewSessionTicket, KeyUpdate) or alert
	Plaintext []byte
}

// Data returns the concatenated plaintext of the disclosed application
// data records, in order.
func (d *Disclosed) Data() []byte {
	n := 0
	for _, r := range d.Records {
		if r.Type == RecordApplicationData {
			n += len(r.Plaintext)
		}
	}
	out := make([]byte, 0, n)
	for _, r := range d.Records {
		if r.Type == RecordApplicationData {
			out = append(out, r.Plaintext...)
		}
	}
	return out
}

// CheckComplete returns nil if the disclosure covers every server record
// from the first key epoch to the end of the session and includes the
// server's close_notify, so the response cannot have been cut short;
// otherwise an error wrapping ErrTruncated. Use it when the whole response
// must be present rather than a selection.
func (d *Disclosed) CheckComplete() error {
	switch {
	case !d.Complete:
		return fmt.Errorf("%w: the disclosed records leave out server records", ErrTruncated)
	case !d.CloseNotify:
		return fmt.Errorf("%w: the server stream ends without close_notify", ErrTruncated)
	}
	return nil
}

func presErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrPresentation, fmt.Sprintf(format, a...))
}

// VerifyPresentation checks p against the signed statement stmt: the
// statement must verify under one of trusted (see VerifyStatement; no
// expectations are applied — check the returned statement's SNI and times
// against your own policy, or call VerifyStatement first), p must name
// that statement, every record must carry a valid inclusion proof under
// the statement's root at its position, and every record's AEAD tag must
// verify under the disclosed server key of its epoch. It returns the
// decrypted records in order. For a statement in MPC mode it also
// refuses any record of key epoch e recorded at or after Reveals[e], when
// the epoch's keys were already out (epochs are counted from the
// presentation's first, which can only make the rule stricter: a later
// epoch was revealed no earlier).
//
// It does not prove that undisclosed records say anything in particular,
// and it cannot tell records the server sent apart from records the server
// was made to send: see the package documentation for the trust model.
func VerifyPresentation(stmt []byte, p *Presentation, trusted []ed25519.PublicKey) (*Disclosed, error) {
	s, err := VerifyStatement(stmt, trusted, Expect{})
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, presErr("missing presentation")
	}
	if sha256.Sum256(stmt) != p.StatementDigest {
		return nil, presErr("presentation is for another statement")
	}
	suite, err := suiteFor(s.Version, s.CipherSuite)
	if err != nil {
		return nil, err
	}
	if len(p.EpochStarts) == 0 || len(p.EpochStarts) > maxEpochs || s.Version == VersionTLS12 && len(p.EpochStarts) != 1 {
		return nil, presErr("%d key epochs", len(p.EpochStarts))
	}
	for i, st := range p.EpochStarts {
		if st >= s.ServerRecords || i > 0 && st <= p.EpochStarts[i-1] {
			return nil, presErr("epoch starts not increasing within the session")
		}
	}
	if len(p.Records) == 0 {
		return nil, presErr("no records disclosed")
	}
	size := s.ClientRecords + s.ServerRecords
	// Sequential pre-pass: order, sizes, epochs, output offsets.
	epochOf := make([]int, len(p.Records))
	offsets := make([]int, len(p.Records)+1)
	epoch := 0
	for i, r := range p.Records {
		if r.Seq >= s.ServerRecords || r.Seq < p.EpochStarts[0] || i > 0 && r.Seq <= p.Records[i-1].Seq {
			return nil, presErr("record %d: sequence number %d out of order or outside the protected session", i, r.Seq)
		}
		if r.Proof.Size != size {
			return nil, presErr("record %d: proof for a tree of %d records, statement has %d", i, r.Proof.Size, size)
		}
		for epoch+1 < len(p.EpochStarts) && p.EpochStarts[epoch+1] <= r.Seq {
			epoch++
		}
		if epoch < len(s.Reveals) && r.Seq >= s.Reveals[epoch] {
			// The epoch's keys were out before the notary recorded this
			// record: anyone they were revealed to could have made it.
			return nil, presErr("record %d: server record %d of key epoch %d was recorded after the epoch's keys were revealed (at %d records)", i, r.Seq, epoch, s.Reveals[epoch])
		}
		epochOf[i] = epoch
		offsets[i+1] = offsets[i] + len(r.Raw)
	}
	// Secrets of every epoch up to the last one used, derived from the
	// first: a KeyUpdate secret cannot be chosen freely.
	secrets := make([][]byte, epochOf[len(epochOf)-1]+1)
	secrets[0] = p.Secret
	for e := 1; e < len(secrets); e++ {
		if secrets[e], err = NextTrafficSecret(suite, secrets[e-1]); err != nil {
			return nil, err
		}
	}
	if _, err := newPresentationOpener(suite, p.Secret); err != nil {
		return nil, presErr("%v", err)
	}

	buf := make([]byte, offsets[len(offsets)-1])
	d := &Disclosed{Statement: s, Records: make([]DisclosedRecord, len(p.Records))}
	errs := make([]error, len(p.Records))
	// verifyRange checks records [lo, hi) with its own hash and openers
	// (so workers share nothing mutable) and decrypts each into its own
	// region of buf.
	verifyRange := func(lo, hi int) {
		h := sha256.New()
		openers := make([]*Opener, len(secrets))
		for i := lo; i < hi; i++ {
			pr := &p.Records[i]
			rec, err := recordFromRaw(ServerToClient, pr.Seq, pr.Raw)
			if err != nil {
				errs[i] = err
				return
			}
			got, err := rootFromPath(h, leafHash(h, rec), &pr.Proof)
			if err != nil {
				errs[i] = err
				return
			}
			if got != s.Root {
				errs[i] = &RecordError{Dir: ServerToClient, Seq: pr.Seq, Reason: "inclusion proof does not lead to the statement's root", Err: ErrProof}
				return
			}
			e := epochOf[i]
			if openers[e] == nil {
				if openers[e], err = newPresentationOpener(suite, secrets[e]); err != nil {
					errs[i] = err
					return
				}
			}
			ct, pt, err := openers[e].Open(buf[offsets[i]:offsets[i]:offsets[i+1]], pr.Seq-p.EpochStarts[e], rec)
			if err != nil {
				errs[i] = err
				return
			}
			d.Records[i] = DisclosedRecord{Seq: pr.Seq, Epoch: e, Type: ct, Plaintext: pt}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(p.Records), 1+offsets[len(offsets)-1]/parallelChunk)
	if workers <= 1 {
		verifyRange(0, len(p.Records))
	} else {
		var wg sync.WaitGroup
		per := (len(p.Records) + workers - 1) / workers
		for lo := 0; lo < len(p.Records); lo += per {
			wg.Add(1)
			go func(lo, hi int) {
				defer wg.Done()
				verifyRange(lo, hi)
			}(lo, min(lo+per, len(p.Records)))
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	for _, r := range d.Records {
		if r.Type == RecordAlert && len(r.Plaintext) == 2 && r.Plaintext[1] == 0 {
			d.CloseNotify = true
		}
	}
	last := p.Records[len(p.Records)-1].Seq
	d.Complete = p.Records[0].Seq == p.EpochStarts[0] && last == s.ServerRecords-1 &&
		uint64(len(p.Records)) == last-p.Records[0].Seq+1
	return d, nil
}

// parallelChunk is the amount of record data per extra verification
// worker: below it, goroutines cost more than they save.
const parallelChunk = 256 << 10

func newPresentationOpener(s Suite, secret []byte) (*Opener, error) {
	if s.Version == VersionTLS13 {
		return NewOpener13(s, secret)
	}
	if len(secret) != s.KeyLen+s.IVLen {
		return nil, fmt.Errorf("%w: tls 1.2 key material of %d bytes, want %d", ErrDecrypt, len(secret), s.KeyLen+s.IVLen)
	}
	return NewOpener12(s, secret[:s.KeyLen], secret[s.KeyLen:])
}

// recordFromRaw rebuilds a Record from its wire bytes, checking its form.
func recordFromRaw(dir Direction, seq uint64, raw []byte) (Record, error) {
	if len(raw) < HeaderLen {
		return Record{}, &RecordError{Dir: dir, Seq: seq, Reason: "shorter than a record header", Err: ErrMalformedRecord}
	}
	r := Record{Dir: dir, Seq: seq, Type: raw[0], Version: uint16(raw[1])<<8 | uint16(raw[2]), Raw: raw}
	return r, r.check()
}

// BuildPresentation is the prover's side: from all records of the session
// in the notary's arrival order (see Order and Interleave), the signed
// statement, the server secret (as in Presentation.Secret) and the key
// epoch starts, it builds the presentation of the server records whose
// sequence numbers are in selected (any order; duplicates are ignored).
// It checks that the records match the statement's root and that every
// selected record opens under the given secret, so a presentation it
// returns verifies.
func BuildPresentation(records []Record, stmt []byte, secret []byte, epochStarts []uint64, selected []uint64) (*Presentation, error) {
	s, err := ParseStatement(stmt)
	if err != nil {
		return nil, err
	}
	tree, err := NewTree(records)
	if err != nil {
		return nil, err
	}
	if tree.Root() != s.Root || tree.Size() != s.ClientRecords+s.ServerRecords {
		return nil, presErr("records do not match the statement's root")
	}
	want := make(map[uint64]bool, len(selected))
	for _, q := range selected {
		want[q] = true
	}
	p := &Presentation{
		StatementDigest: sha256.Sum256(stmt),
		Secret:          append([]byte(nil), secret...),
		EpochStarts:     append([]uint64(nil), epochStarts...),
	}
	for i, r := range records {
		if r.Dir != ServerToClient || !want[r.Seq] {
			continue
		}
		proof, err := tree.Prove(uint64(i))
		if err != nil {
			return nil, err
		}
		p.Records = append(p.Records, PresentedRecord{Seq: r.Seq, Raw: r.Raw, Proof: *proof})
		delete(want, r.Seq)
	}
	if len(want) != 0 {
		return nil, presErr("%d selected records are not server records of the session", len(want))
	}
	if err := p.selfCheck(s); err != nil {
		return nil, err
	}
	return p, nil
}

// selfCheck opens every record of p as VerifyPresentation would, without
// a signature check (the prover may not hold the notary's key list).
func (p *Presentation) selfCheck(s *Statement) error {
	suite, err := suiteFor(s.Version, s.CipherSuite)
	if err != nil {
		return err
	}
	if len(p.EpochStarts) == 0 {
		return presErr("no key epochs")
	}
	secret := p.Secret
	epoch := 0
	op, err := newPresentationOpener(suite, secret)
	if err != nil {
		return presErr("%v", err)
	}
	for _, r := range p.Records {
		if r.Seq < p.EpochStarts[0] {
			return presErr("record %d precedes the first key epoch", r.Seq)
		}
		for epoch+1 < len(p.EpochStarts) && p.EpochStarts[epoch+1] <= r.Seq {
			epoch++
			if secret, err = NextTrafficSecret(suite, secret); err != nil {
				return err
			}
			if op, err = newPresentationOpener(suite, secret); err != nil {
				return err
			}
		}
		rec, err := recordFromRaw(ServerToClient, r.Seq, r.Raw)
		if err != nil {
			return err
		}
		if _, _, err := op.Open(nil, r.Seq-p.EpochStarts[epoch], rec); err != nil {
			return err
		}
	}
	return nil
}
