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

// checkServer13 authenticates every protected server record of a TLS 1.3
// session: the handshake flight under the handshake traffic secret, then
// application records under application_traffic_secret_N, following
// KeyUpdate messages and passing over NewSessionTicket messages.
func checkServer13(k serverKeys, server []mpctls.Record) (*checkReport, error) {
	rep := &checkReport{}
	opener, err := mpctls.NewOpener13(k.suite, k.handshake)
	if err != nil {
		return nil, err
	}
	const (
		plain = iota
		handshake
		application
	)
	phase := plain
	var seq uint64
	var msgs msgSplitter
	secret := k.appSecret0
	var buf []byte
	for _, r := range server {
		switch r.Type {
		case mpctls.RecordHandshake:
			if phase != plain {
				return nil, checkErr(r, "plaintext handshake record after encryption began")
			}
			continue
		case mpctls.RecordChangeCipherSpec:
			if phase == application {
				return nil, checkErr(r, "change_cipher_spec after the handshake")
			}
			continue
		case mpctls.RecordAlert:
			return nil, checkErr(r, "plaintext alert")
		case mpctls.RecordApplicationData:
		default:
			return nil, checkErr(r, "unknown record type")
		}
		if phase == plain {
			phase = handshake
		}
		ct, pt, err := opener.Open(buf[:0], seq, r)
		if err != nil {
			return nil, err
		}
		buf = pt[:0]
		seq++
		switch ct {
		case mpctls.RecordApplicationData:
			if phase != application {
				return nil, checkErr(r, "application data before the server finished")
			}
			rep.appSeqs = append(rep.appSeqs, r.Seq)
			rep.appBytes += len(pt)
			continue
		case mpctls.RecordAlert:
			continue
		}
		msgs.buf = append(msgs.buf, pt...)
		for {
			typ, _, ok, err := msgs.next()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			rekey := false
			switch {
			case phase == handshake && typ == hsFinished:
				phase, rekey = application, true
			case phase == application && typ == hsKeyUpdate:
				if secret, err = mpctls.NextTrafficSecret(k.suite, secret); err != nil {
					return nil, err
				}
				rep.keyUpdates++
				rekey = true
			case phase == application && typ == hsNewSessionTkt:
				rep.tickets++
			case phase == application:
				return nil, checkErr(r, fmt.Sprintf("unexpected post-handshake message %d", typ))
			}
			if rekey {
				if len(msgs.buf) != 0 {
					return nil, checkErr(r, "key change not at a record boundary")
				}
				if opener, err = mpctls.NewOpener13(k.suite, secret); err != nil {
					return nil, err
				}
				seq = 0
				rep.epochStarts = append(rep.epochStarts, r.Seq+1)
			}
		}
	}
	if phase != application {
		return nil, fmt.Errorf("%w: the server never finished its handshake", mpctls.ErrHandshake)
	}
	return rep, nil
}

// checkServer12 authenticates every protected server record of a TLS 1.2
// session: everything after the server's change_cipher_spec, under the
// server write key.
func checkServer12(k serverKeys, server []mpctls.Record) (*checkReport, error) {
	rep := &checkReport{}
	opener, err := mpctls.NewOpener12(k.suite, k.key12, k.iv12)
	if err != nil {
		return nil, err
	}
	encrypted := false
	var seq uint64
	var buf []byte
	for _, r := range server {
		if !encrypted {
			switch r.Type {
			case mpctls.RecordHandshake:
				continue
			case mpctls.RecordChangeCipherSpec:
				encrypted = true
				rep.epochStarts = []uint64{r.Seq + 1}
				continue
			default:
				return nil, checkErr(r, "unprotected record after the hellos")
			}
		}
		if r.Type == mpctls.RecordChangeCipherSpec {
			return nil, checkErr(r, "second change_cipher_spec (renegotiation)")
		}
		ct, pt, err := opener.Open(buf[:0], seq, r)
		if err != nil {
			return nil, err
		}
		buf = pt[:0]
		if seq == 0 && (ct != mpctls.RecordHandshake || len(pt) < 4 || pt[0] != hsFinished) {
			return nil, checkErr(r, "first protected server record is not Finished")
		}
		if seq > 0 && ct == mpctls.RecordHandshake {
			return nil, checkErr(r, "post-handshake handshake message (renegotiation)")
		}
		if ct == mpctls.RecordApplicationData {
			rep.appSeqs = append(rep.appSeqs, r.Seq)
			rep.appBytes += len(pt)
		}
		seq++
	}
	if !encrypted {
		return nil, fmt.Errorf("%w: the server never finished its handshake", mpctls.ErrHandshake)
	}
	return rep, nil
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
