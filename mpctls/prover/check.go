package prover

import (
	"fmt"

	"github.com/acds-project/acds/mpctls"
)

const (
	hsFinished        = 20
	hsKeyUpdate       = 24
	hsNewSessionTkt   = 4
	hsClientHello     = 1
	hsServerHello     = 2
	maxHandshakeBytes = 256 << 10
)

// serverKeys is what authenticates the server direction after the
// handshake: the TLS 1.3 application traffic secret of epoch 0 (later
// epochs follow by KeyUpdate), or the TLS 1.2 server write key and IV.
type serverKeys struct {
	suite      mpctls.Suite
	handshake  []byte // TLS 1.3 server handshake traffic secret
	appSecret0 []byte // TLS 1.3 server application traffic secret 0
	key12      []byte // TLS 1.2 server write key
	iv12       []byte // TLS 1.2 server write IV
}

// checkReport says what the check of the server direction found.
type checkReport struct {
	keyUpdates  int      // KeyUpdate messages from the server
	tickets     int      // NewSessionTicket messages from the server
	appSeqs     []uint64 // server records carrying application data
	appBytes    int      // application data plaintext bytes
	epochStarts []uint64 // server records where application key epochs start
	closeNotify bool     // the server sent close_notify
}

func checkErr(r mpctls.Record, reason string) error {
	return &mpctls.RecordError{Dir: r.Dir, Seq: r.Seq, Reason: reason, Err: mpctls.ErrDecrypt}
}

// msgSplitter reassembles a handshake message stream.
type msgSplitter struct{ buf []byte }

// next returns the next complete message's type, or ok=false.
func (m *msgSplitter) next() (typ uint8, body []byte, ok bool, err error) {
	if len(m.buf) < 4 {
		return 0, nil, false, nil
	}
	n := int(m.buf[1])<<16 | int(m.buf[2])<<8 | int(m.buf[3])
	if n > maxHandshakeBytes {
		return 0, nil, false, fmt.Errorf("%w: handshake message of %d bytes", mpctls.ErrHandshake, n)
	}
	if len(m.buf) < 4+n {
		return 0, nil, false, nil
	}
	typ, body = m.buf[0], m.buf[4:4+n]
	m.buf = m.buf[4+n:]
	return typ, body, true, nil
}

// checker authenticates the protected server records of a session one at
// a time, in sequence order, so the prover can check records while they
// stream in. It is not safe for concurrent use.
type checker struct {
	k      serverKeys
	tls13  bool
	rep    checkReport
	opener *mpctls.Opener
	phase  int
	seq    uint64 // sequence number within the current key epoch
	secret []byte // TLS 1.3 current application traffic secret
	msgs   msgSplitter
	buf    []byte
	err    error
}

const (
	phasePlain = iota
	phaseHandshake
	phaseApplication
)

// newChecker returns a checker for TLS 1.3 (tls13) or TLS 1.2 records.
func newChecker(k serverKeys, tls13 bool) (*checker, error) {
	c := &checker{k: k, tls13: tls13, secret: k.appSecret0}
	var err error
	if tls13 {
		c.opener, err = mpctls.NewOpener13(k.suite, k.handshake)
	} else {
		c.opener, err = mpctls.NewOpener12(k.suite, k.key12, k.iv12)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// add checks the next server record. After an error, every call returns it.
func (c *checker) add(r mpctls.Record) error {
	if c.err != nil {
		return c.err
	}
	if c.tls13 {
		c.err = c.add13(r)
	} else {
		c.err = c.add12(r)
	}
	return c.err
}

// finish returns the report once every record has been added.
func (c *checker) finish() (*checkReport, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.phase != phaseApplication {
		return nil, fmt.Errorf("%w: the server never finished its handshake", mpctls.ErrHandshake)
	}
	rep := c.rep
	return &rep, nil
}

// add13 follows TLS 1.3: the handshake flight under the handshake traffic
// secret, then application records under application_traffic_secret_N,
// following KeyUpdate messages and passing over NewSessionTicket messages.
func (c *checker) add13(r mpctls.Record) error {
	switch r.Type {
	case mpctls.RecordHandshake:
		if c.phase != phasePlain {
			return checkErr(r, "plaintext handshake record after encryption began")
		}
		return nil
	case mpctls.RecordChangeCipherSpec:
		if c.phase == phaseApplication {
			return checkErr(r, "change_cipher_spec after the handshake")
		}
		return nil
	case mpctls.RecordAlert:
		return checkErr(r, "plaintext alert")
	case mpctls.RecordApplicationData:
	default:
		return checkErr(r, "unknown record type")
	}
	if c.phase == phasePlain {
		c.phase = phaseHandshake
	}
	ct, pt, err := c.opener.Open(c.buf[:0], c.seq, r)
	if err != nil {
		return err
	}
	c.buf = pt[:0]
	c.seq++
	switch ct {
	case mpctls.RecordApplicationData:
		if c.phase != phaseApplication {
			return checkErr(r, "application data before the server finished")
		}
		c.rep.appSeqs = append(c.rep.appSeqs, r.Seq)
		c.rep.appBytes += len(pt)
		return nil
	case mpctls.RecordAlert:
		c.noteAlert(pt)
		return nil
	}
	c.msgs.buf = append(c.msgs.buf, pt...)
	for {
		typ, _, ok, err := c.msgs.next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		rekey := false
		switch {
		case c.phase == phaseHandshake && typ == hsFinished:
			c.phase, rekey = phaseApplication, true
		case c.phase == phaseApplication && typ == hsKeyUpdate:
			if c.secret, err = mpctls.NextTrafficSecret(c.k.suite, c.secret); err != nil {
				return err
			}
			c.rep.keyUpdates++
			rekey = true
		case c.phase == phaseApplication && typ == hsNewSessionTkt:
			c.rep.tickets++
		case c.phase == phaseApplication:
			return checkErr(r, fmt.Sprintf("unexpected post-handshake message %d", typ))
		}
		if rekey {
			if len(c.msgs.buf) != 0 {
				return checkErr(r, "key change not at a record boundary")
			}
			if c.opener, err = mpctls.NewOpener13(c.k.suite, c.secret); err != nil {
				return err
			}
			c.seq = 0
			c.rep.epochStarts = append(c.rep.epochStarts, r.Seq+1)
		}
	}
}

// add12 follows TLS 1.2: everything after the server's change_cipher_spec
// is protected under the server write key, starting with Finished.
func (c *checker) add12(r mpctls.Record) error {
	if c.phase == phasePlain {
		switch r.Type {
		case mpctls.RecordHandshake:
			return nil
		case mpctls.RecordChangeCipherSpec:
			c.phase = phaseApplication
			c.rep.epochStarts = []uint64{r.Seq + 1}
			return nil
		default:
			return checkErr(r, "unprotected record after the hellos")
		}
	}
	if r.Type == mpctls.RecordChangeCipherSpec {
		return checkErr(r, "second change_cipher_spec (renegotiation)")
	}
	ct, pt, err := c.opener.Open(c.buf[:0], c.seq, r)
	if err != nil {
		return err
	}
	c.buf = pt[:0]
	if c.seq == 0 && (ct != mpctls.RecordHandshake || len(pt) < 4 || pt[0] != hsFinished) {
		return checkErr(r, "first protected server record is not Finished")
	}
	if c.seq > 0 && ct == mpctls.RecordHandshake {
		return checkErr(r, "post-handshake handshake message (renegotiation)")
	}
	if ct == mpctls.RecordApplicationData {
		c.rep.appSeqs = append(c.rep.appSeqs, r.Seq)
		c.rep.appBytes += len(pt)
	}
	if ct == mpctls.RecordAlert {
		c.noteAlert(pt)
	}
	c.seq++
	return nil
}

// noteAlert records a close_notify (alert description 0).
func (c *checker) noteAlert(pt []byte) {
	if len(pt) == 2 && pt[1] == 0 {
		c.rep.closeNotify = true
	}
}

// checkAll runs a checker over a whole direction.
func checkAll(k serverKeys, tls13 bool, server []mpctls.Record) (*checkReport, error) {
	c, err := newChecker(k, tls13)
	if err != nil {
		return nil, err
	}
	for _, r := range server {
		if err := c.add(r); err != nil {
			return nil, err
		}
	}
	return c.finish()
}

// checkServer13 checks a whole TLS 1.3 server direction.
func checkServer13(k serverKeys, server []mpctls.Record) (*checkReport, error) {
	return checkAll(k, true, server)
}

// checkServer12 checks a whole TLS 1.2 server direction.
func checkServer12(k serverKeys, server []mpctls.Record) (*checkReport, error) {
	return checkAll(k, false, server)
}

// helloRandom returns the random of the first handshake message of the
// given type in a direction's plaintext handshake records.
func helloRandom(records []mpctls.Record, want uint8) ([]byte, error) {
	var msgs msgSplitter
	for _, r := range records {
		if r.Type != mpctls.RecordHandshake {
			if r.Type == mpctls.RecordChangeCipherSpec {
				break
			}
			continue
		}
		msgs.buf = append(msgs.buf, r.Fragment()...)
		typ, body, ok, err := msgs.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if typ != want || len(body) < 34 {
			return nil, fmt.Errorf("%w: first handshake message is type %d, want %d", mpctls.ErrHandshake, typ, want)
		}
		return append([]byte(nil), body[2:34]...), nil
	}
	return nil, fmt.Errorf("%w: no hello of type %d", mpctls.ErrHandshake, want)
}
