package mpctls

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"testing"
	"time"
)

// notarize plays the notary for a captured session: it checks the
// handshake, builds the transcript and signs the statement.
func notarize(t testing.TB, c *captured, key ed25519.PrivateKey) (*Handshake, []byte) {
	t.Helper()
	hs, err := VerifyHandshake(c.records, c.disclosure(), hsOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	var tr Transcript
	for _, r := range c.records {
		if err := tr.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	st := &Statement{
		Start: time.Now().Add(-time.Second), End: time.Now(),
		SNI: hs.SNI, Address: "127.0.0.1:443", Version: hs.Version, CipherSuite: hs.CipherSuite,
		CertChainDigest: hs.CertChainDigest, Root: tr.Root(),
		ClientRecords: tr.Records(ClientToServer), ClientBytes: tr.Bytes(ClientToServer),
		ServerRecords: tr.Records(ServerToClient), ServerBytes: tr.Bytes(ServerToClient),
	}
	rand.Read(st.SessionID[:])
	b, err := st.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	return hs, b
}

// serverSecret is what the prover discloses in a presentation.
func serverSecret(t testing.TB, c *captured, hs *Handshake) []byte {
	t.Helper()
	if hs.Version == VersionTLS13 {
		return c.secrets["SERVER_TRAFFIC_SECRET_0"]
	}
	suite, _ := SuiteByID(hs.CipherSuite)
	key, iv, err := ServerWriteKey12(suite, c.secrets["CLIENT_RANDOM"], hs.ClientRandom[:], hs.ServerRandom[:])
	if err != nil {
		t.Fatal(err)
	}
	return append(key, iv...)
}

func serverSeqs(c *captured, from uint64) []uint64 {
	var out []uint64
	for _, r := range c.records {
		if r.Dir == ServerToClient && r.Seq >= from {
			out = append(out, r.Seq)
		}
	}
	return out
}

func TestPresentationGo(t *testing.T) {
	key := testKey(t, 7)
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	resp := make([]byte, 100_000)
	rand.Read(resp)
	for _, c := range goCases() {
		t.Run(c.name, func(t *testing.T) {
			cap := c.capture(t, resp)
			if !bytes.Equal(cap.response, resp) {
				t.Fatal("setup: response")
			}
			hs, stmt := notarize(t, cap, key)
			p, err := BuildPresentation(cap.records, stmt, serverSecret(t, cap, hs), []uint64{hs.ServerProtectedFrom}, serverSeqs(cap, hs.ServerProtectedFrom))
			if err != nil {
				t.Fatal(err)
			}
			b, err := p.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			var q Presentation
			if err := q.Unmarshal(b); err != nil {
				t.Fatal(err)
			}
			d, err := VerifyPresentation(stmt, &q, trusted)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(d.Data(), resp) || !d.Complete || !d.CloseNotify {
				t.Fatalf("disclosed %d bytes, complete %v, close_notify %v", len(d.Data()), d.Complete, d.CloseNotify)
			}
			if d.Statement.SNI != testHost {
				t.Fatal("statement")
			}
		})
	}
}

func TestPresentationRejects(t *testing.T) {
	key := testKey(t, 7)
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	resp := bytes.Repeat([]byte("clinical data "), 5000)
	cap := goCase{version: tls.VersionTLS13, suite: tls.TLS_AES_128_GCM_SHA256, ecdsa: true}.capture(t, resp)
	hs, stmt := notarize(t, cap, key)
	secret := serverSecret(t, cap, hs)
	starts := []uint64{hs.ServerProtectedFrom}
	all := serverSeqs(cap, hs.ServerProtectedFrom)
	good, err := BuildPresentation(cap.records, stmt, secret, starts, all)
	if err != nil {
		t.Fatal(err)
	}
	clone := func() *Presentation {
		b, _ := good.Marshal()
		var p Presentation
		if err := p.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		return &p
	}

	// Selective disclosure: a subset verifies and is not complete.
	sub, err := BuildPresentation(cap.records, stmt, secret, starts, all[2:4])
	if err != nil {
		t.Fatal(err)
	}
	d, err := VerifyPresentation(stmt, sub, trusted)
	if err != nil || d.Complete || len(d.Records) != 2 {
		t.Fatalf("subset: %v", err)
	}
	// Truncation: without the last records the disclosure is incomplete.
	trunc, _ := BuildPresentation(cap.records, stmt, secret, starts, all[:len(all)-1])
	if d, err := VerifyPresentation(stmt, trunc, trusted); err != nil || d.Complete || d.CloseNotify || !errors.Is(d.CheckComplete(), ErrTruncated) {
		t.Fatalf("truncated: %v %+v", err, d)
	}
	if d, err := VerifyPresentation(stmt, good, trusted); err != nil || d.CheckComplete() != nil {
		t.Fatalf("complete: %v", err)
	}

	cases := map[string]struct {
		mut  func(p *Presentation) []byte // returns the statement to use, nil for stmt
		want error
	}{
		"flipped bit":    {func(p *Presentation) []byte { p.Records[1].Raw[20] ^= 4; return nil }, ErrProof},
		"flipped header": {func(p *Presentation) []byte { p.Records[0].Raw[0] ^= 0x80; return nil }, ErrUnknownRecordType},
		"wrong secret":   {func(p *Presentation) []byte { p.Secret[3] ^= 1; return nil }, ErrDecrypt},
		"client secret":  {func(p *Presentation) []byte { p.Secret = cap.secrets["CLIENT_TRAFFIC_SECRET_0"]; return nil }, ErrDecrypt},
		"wrong epoch":    {func(p *Presentation) []byte { p.EpochStarts[0]--; p.Records = p.Records[1:]; return nil }, ErrDecrypt},
		"reordered": {func(p *Presentation) []byte {
			p.Records[1], p.Records[2] = p.Records[2], p.Records[1]
			return nil
		}, ErrPresentation},
		"duplicated": {func(p *Presentation) []byte { p.Records = append(p.Records[:2], p.Records[1:]...); return nil }, ErrPresentation},
		"wrong seq":  {func(p *Presentation) []byte { p.Records[1].Seq++; p.Records = p.Records[:2]; return nil }, ErrProof},
		"wrong size": {func(p *Presentation) []byte { p.Records[1].Proof.Size--; return nil }, ErrPresentation},
		"wrong path": {func(p *Presentation) []byte { p.Records[1].Proof.Path[0][0] ^= 1; return nil }, ErrProof},
		"empty":      {func(p *Presentation) []byte { p.Records = nil; return nil }, ErrPresentation},
		"other statement": {func(p *Presentation) []byte {
			_, other := notarize(t, cap, key)
			return other
		}, ErrPresentation},
		"untrusted notary": {func(p *Presentation) []byte {
			_, other := notarize(t, cap, testKey(t, 8))
			p.StatementDigest = sha256Sum(other)
			return other
		}, ErrSignature},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := clone()
			s := c.mut(p)
			if s == nil {
				s = stmt
			}
			if _, err := VerifyPresentation(s, p, trusted); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	// A presentation for another session, relabelled to this statement,
	// fails its proofs.
	cap2 := goCase{version: tls.VersionTLS13, suite: tls.TLS_AES_128_GCM_SHA256, ecdsa: true}.capture(t, resp)
	hs2, stmt2 := notarize(t, cap2, key)
	p2, err := BuildPresentation(cap2.records, stmt2, serverSecret(t, cap2, hs2), []uint64{hs2.ServerProtectedFrom}, serverSeqs(cap2, hs2.ServerProtectedFrom))
	if err != nil {
		t.Fatal(err)
	}
	p2.StatementDigest = good.StatementDigest
	if _, err := VerifyPresentation(stmt, p2, trusted); !errors.Is(err, ErrProof) && !errors.Is(err, ErrPresentation) {
		t.Fatalf("foreign records: %v", err)
	}
	// The builder refuses records that are not the statement's.
	if _, err := BuildPresentation(cap2.records, stmt, secret, starts, all); !errors.Is(err, ErrPresentation) {
		t.Fatalf("builder: %v", err)
	}
	if _, err := BuildPresentation(cap.records, stmt, secret, starts, []uint64{0}); !errors.Is(err, ErrPresentation) {
		t.Fatalf("builder, plaintext record: %v", err)
	}
	if _, err := BuildPresentation(cap.records, stmt, cap.secrets["CLIENT_TRAFFIC_SECRET_0"], starts, all); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("builder, wrong secret: %v", err)
	}
}

// seal13 protects a TLS 1.3 record the way a server would; the test uses
// it to make sessions with KeyUpdates, which crypto/tls servers never
// initiate.
func seal13(t testing.TB, s Suite, secret []byte, seq uint64, inner uint8, pt []byte) []byte {
	key, iv, err := TrafficKey(s, secret)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.aead(key)
	n := len(pt) + 1 + a.Overhead()
	hdr := []byte{RecordApplicationData, 3, 3, byte(n >> 8), byte(n)}
	var nonce [12]byte
	copy(nonce[:], iv)
	xorSeq(&nonce, seq)
	return a.Seal(hdr, nonce[:], append(append([]byte(nil), pt...), inner), hdr)
}

// keyUpdateSession builds a synthetic TLS 1.3 session whose server performs
// two KeyUpdates, and returns the records, the epoch starts, the first
// application secret and the plaintexts in order.
func keyUpdateSession(t testing.TB, s Suite) ([]Record, []uint64, []byte, [][]byte) {
	secret := make([]byte, s.Hash.Size())
	rand.Read(secret)
	var recs []Record
	recs = append(recs, rec(ClientToServer, 0, RecordHandshake, []byte{1, 0, 0, 0}))
	recs = append(recs, rec(ServerToClient, 0, RecordHandshake, []byte{2, 0, 0, 0}))
	var plain [][]byte
	seq := uint64(1)
	cur := secret
	starts := []uint64{1}
	for e := 0; e < 3; e++ {
		for i := uint64(0); i < 3; i++ {
			pt := []byte{byte(e), byte(i), 'd', 'a', 't', 'a'}
			plain = append(plain, pt)
			recs = append(recs, Record{Dir: ServerToClient, Seq: seq, Type: RecordApplicationData, Version: 0x0303, Raw: seal13(t, s, cur, i, RecordApplicationData, pt)})
			seq++
		}
		if e < 2 {
			// KeyUpdate(update_not_requested) is the last record of the epoch.
			recs = append(recs, Record{Dir: ServerToClient, Seq: seq, Type: RecordApplicationData, Version: 0x0303, Raw: seal13(t, s, cur, 3, RecordHandshake, []byte{24, 0, 0, 1, 0})})
			seq++
			cur, _ = NextTrafficSecret(s, cur)
			starts = append(starts, seq)
		}
	}
	return recs, starts, secret, plain
}

func TestPresentationKeyUpdate(t *testing.T) {
	key := testKey(t, 9)
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	for _, id := range []uint16{0x1301, 0x1302, 0x1303} {
		s, _ := SuiteByID(id)
		recs, starts, secret, plain := keyUpdateSession(t, s)
		var tr Transcript
		for _, r := range recs {
			if err := tr.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		st := &Statement{SessionID: [16]byte{1}, Start: time.Now(), End: time.Now(), SNI: testHost, Address: "127.0.0.1:1",
			Version: VersionTLS13, CipherSuite: id, CertChainDigest: [32]byte{1}, Root: tr.Root(),
			ClientRecords: tr.Records(ClientToServer), ClientBytes: tr.Bytes(ClientToServer),
			ServerRecords: tr.Records(ServerToClient), ServerBytes: tr.Bytes(ServerToClient)}
		stmt, err := st.Sign(key)
		if err != nil {
			t.Fatal(err)
		}
		var all []uint64
		for q := uint64(1); q < st.ServerRecords; q++ {
			all = append(all, q)
		}
		p, err := BuildPresentation(recs, stmt, secret, starts, all)
		if err != nil {
			t.Fatal(err)
		}
		d, err := VerifyPresentation(stmt, p, trusted)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d.Data(), bytes.Join(plain, nil)) || !d.Complete || d.Records[len(d.Records)-1].Epoch != 2 {
			t.Fatalf("%s: key update data", s.Name)
		}
		// Only the last epoch: disclose the later secret directly.
		s2, _ := NextTrafficSecret(s, secret)
		s3, _ := NextTrafficSecret(s, s2)
		p3, err := BuildPresentation(recs, stmt, s3, starts[2:], all[len(all)-3:])
		if err != nil {
			t.Fatal(err)
		}
		if d, err := VerifyPresentation(stmt, p3, trusted); err != nil || len(d.Records) != 3 {
			t.Fatalf("last epoch: %v", err)
		}
		// Forgetting a KeyUpdate breaks the tags.
		p.EpochStarts = starts[:2]
		if _, err := VerifyPresentation(stmt, p, trusted); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("missing epoch: %v", err)
		}
	}
}

func TestOrderInterleave(t *testing.T) {
	recs := session(17)
	var tr Transcript
	var cli, srv []Record
	for _, r := range recs {
		if err := tr.Add(r); err != nil {
			t.Fatal(err)
		}
		if r.Dir == ClientToServer {
			cli = append(cli, r)
		} else {
			srv = append(srv, r)
		}
	}
	o := tr.Order()
	got, err := Interleave(cli, srv, o)
	if err != nil {
		t.Fatal(err)
	}
	tree, _ := NewTree(got)
	if tree.Root() != tr.Root() {
		t.Fatal("interleaved records give another root")
	}
	bad := append(Order(nil), o...)
	bad[0]++
	if _, err := Interleave(cli, srv, bad); !errors.Is(err, ErrSequence) {
		t.Fatal(err)
	}
	if _, err := Interleave(cli, srv, o[:len(o)-1]); !errors.Is(err, ErrSequence) {
		t.Fatal(err)
	}
}

// TestPresentationParallel covers the multi-worker path of
// VerifyPresentation (more than parallelChunk of records).
func TestPresentationParallel(t *testing.T) {
	key := testKey(t, 7)
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	resp := make([]byte, 4*parallelChunk)
	rand.Read(resp)
	cap := goCase{version: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, ecdsa: true}.capture(t, resp)
	hs, stmt := notarize(t, cap, key)
	p, err := BuildPresentation(cap.records, stmt, serverSecret(t, cap, hs), []uint64{hs.ServerProtectedFrom}, serverSeqs(cap, hs.ServerProtectedFrom))
	if err != nil {
		t.Fatal(err)
	}
	d, err := VerifyPresentation(stmt, p, trusted)
	if err != nil || !bytes.Equal(d.Data(), resp) || !d.Complete {
		t.Fatalf("verify: %v", err)
	}
	last := &p.Records[len(p.Records)-2]
	last.Raw[len(last.Raw)-1] ^= 1
	if _, err := VerifyPresentation(stmt, p, trusted); !errors.Is(err, ErrProof) {
		t.Fatalf("flipped bit in the last worker's range: %v", err)
	}
}

// TestPresentationTruncatedSession: a session cut before the server's
// close_notify (as if the connection were reset) yields a complete
// disclosure that CheckComplete still refuses.
func TestPresentationTruncatedSession(t *testing.T) {
	key := testKey(t, 7)
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	cap := goCase{version: tls.VersionTLS13, suite: tls.TLS_AES_128_GCM_SHA256}.capture(t, []byte("partial"))
	lastServer := -1
	for i, r := range cap.records {
		if r.Dir == ServerToClient {
			lastServer = i
		}
	}
	cap.records = append(cap.records[:lastServer:lastServer], cap.records[lastServer+1:]...)
	hs, stmt := notarize(t, cap, key)
	p, err := BuildPresentation(cap.records, stmt, serverSecret(t, cap, hs), []uint64{hs.ServerProtectedFrom}, serverSeqs(cap, hs.ServerProtectedFrom))
	if err != nil {
		t.Fatal(err)
	}
	d, err := VerifyPresentation(stmt, p, trusted)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Complete || d.CloseNotify || !errors.Is(d.CheckComplete(), ErrTruncated) {
		t.Fatalf("complete %v close_notify %v: %v", d.Complete, d.CloseNotify, d.CheckComplete())
	}
}

// TestPresentationReveals: in an MPC-mode statement, a server record of
// key epoch e verifies only if it was recorded before the epoch's keys
// were revealed (its sequence number is below Reveals[e]); epochs past
// the reveal points were revealed after the session.
func TestPresentationReveals(t *testing.T) {
	key := testKey(t, 9)
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	s, _ := SuiteByID(0x1301)
	recs, starts, secret, _ := keyUpdateSession(t, s)
	var tr Transcript
	for _, r := range recs {
		if err := tr.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	sign := func(reveals []uint64) []byte {
		st := &Statement{SessionID: [16]byte{1}, Start: time.Now(), End: time.Now(), SNI: testHost, Address: "127.0.0.1:1",
			Version: VersionTLS13, CipherSuite: s.ID, CertChainDigest: [32]byte{1}, Root: tr.Root(),
			ClientRecords: tr.Records(ClientToServer), ClientBytes: tr.Bytes(ClientToServer),
			ServerRecords: tr.Records(ServerToClient), ServerBytes: tr.Bytes(ServerToClient),
			Mode: ModeMPC, Reveals: reveals}
		b, err := st.Sign(key)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var all []uint64
	for q := starts[0]; q < tr.Records(ServerToClient); q++ {
		all = append(all, q)
	}
	// Epoch 0 ends with the KeyUpdate at starts[1]-1, epoch 1 at
	// starts[2]-1: revealing each just after its KeyUpdate is recorded is
	// what an honest notary does.
	honest := sign([]uint64{starts[1], starts[2]})
	p, err := BuildPresentation(recs, honest, secret, starts, all)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := VerifyPresentation(honest, p, trusted); err != nil || !d.Complete {
		t.Fatalf("honest reveals: %v", err)
	}
	// Epoch 1 revealed before its KeyUpdate was recorded: that record,
	// and anything of epoch 1 after the reveal, proves nothing.
	early := sign([]uint64{starts[1], starts[2] - 1})
	p, err = BuildPresentation(recs, early, secret, starts, all)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyPresentation(early, p, trusted); !errors.Is(err, ErrPresentation) {
		t.Fatalf("record after its epoch's reveal: %v", err)
	}
	// The records of epoch 1 recorded before the reveal still verify.
	p, err = BuildPresentation(recs, early, secret, starts, all[:len(all)-5])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyPresentation(early, p, trusted); err != nil {
		t.Fatalf("records before the reveal: %v", err)
	}
}
