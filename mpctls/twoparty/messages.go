package twoparty

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/acds-project/acds/mpctls"
)

// The TLS layer's messages between the prover and the notary, on the
// engine's control stream. The prover drives: each request says what the
// session does next, the notary checks it against what it sees on the
// wire and answers, and then both make the engine calls of that step.
//
//	request = kind (1 byte) ‖ body
//	answer  = status (1 byte: 0 ok, 1 refused) ‖ body
//
// Bodies are fixed-size integers (big endian) except a reveal's
// checkpoint and a refusal's reason, which carry a 2-byte length.

// Request kinds.
const (
	// reqServerHello: the ServerHello is in; derive the handshake secrets
	// (TLS 1.3) from the ECDHE secret.
	reqServerHello byte = 1
	// reqServerFlight: the server's flight through its Finished is in
	// (TLS 1.3); check it and derive the application secrets.
	reqServerFlight byte = 2
	// reqClientKeyExchange: the prover sent its ClientKeyExchange (TLS
	// 1.2); derive the master secret, the key block and the client
	// Finished.
	reqClientKeyExchange byte = 3
	// reqServerFinished: the server's ChangeCipherSpec and Finished are in
	// (TLS 1.2); check the Finished in two-party computation.
	reqServerFinished byte = 4
	// reqReveal: reveal the keys of a server epoch once the given server
	// record is committed (or, with end set, once the server direction is
	// over, cutting it if it is not).
	reqReveal byte = 5
	// reqNextEpoch: derive the keys of the next server epoch (TLS 1.3).
	reqNextEpoch byte = 6
	// reqFinish: the tunnel is closed; reveal the server secret and end
	// the computation.
	reqFinish byte = 7
)

// request is a parsed request.
type request struct {
	kind  byte
	epoch uint32 // reqReveal
	after uint64 // reqReveal: the server record that ends the epoch
	end   bool   // reqReveal: reveal at the end of the server direction
}

// maxMessage bounds every message of the TLS layer.
const maxMessage = 1024

// maxReason bounds a refusal's reason.
const maxReason = 256

func (r request) marshal() []byte {
	b := []byte{r.kind}
	if r.kind == reqReveal {
		b = binary.BigEndian.AppendUint32(b, r.epoch)
		b = binary.BigEndian.AppendUint64(b, r.after)
		flag := byte(0)
		if r.end {
			flag = 1
		}
		b = append(b, flag)
	}
	return b
}

func parseRequest(b []byte) (request, error) {
	if len(b) == 0 {
		return request{}, fmt.Errorf("%w: empty request", ErrProtocol)
	}
	r := request{kind: b[0]}
	switch r.kind {
	case reqServerHello, reqServerFlight, reqClientKeyExchange, reqServerFinished, reqNextEpoch, reqFinish:
		if len(b) != 1 {
			return request{}, fmt.Errorf("%w: request %d with a body", ErrProtocol, r.kind)
		}
	case reqReveal:
		if len(b) != 1+4+8+1 || b[13] > 1 {
			return request{}, fmt.Errorf("%w: malformed reveal request", ErrProtocol)
		}
		r.epoch = binary.BigEndian.Uint32(b[1:])
		r.after = binary.BigEndian.Uint64(b[5:])
		r.end = b[13] == 1
	default:
		return request{}, fmt.Errorf("%w: unknown request %d", ErrProtocol, r.kind)
	}
	return r, nil
}

// answer is a parsed answer.
type answer struct {
	ok         bool
	reason     string // a refusal's
	checkpoint []byte // a reveal's: the signed mpctls.Checkpoint
}

func (a answer) marshal() []byte {
	if !a.ok {
		reason := a.reason
		if len(reason) > maxReason {
			reason = reason[:maxReason]
		}
		for !utf8.ValidString(reason) {
			reason = reason[:len(reason)-1]
		}
		b := []byte{1}
		b = binary.BigEndian.AppendUint16(b, uint16(len(reason)))
		return append(b, reason...)
	}
	b := []byte{0}
	b = binary.BigEndian.AppendUint16(b, uint16(len(a.checkpoint)))
	return append(b, a.checkpoint...)
}

func parseAnswer(b []byte) (answer, error) {
	if len(b) < 3 || b[0] > 1 {
		return answer{}, fmt.Errorf("%w: malformed answer", ErrProtocol)
	}
	n := int(binary.BigEndian.Uint16(b[1:]))
	if len(b) != 3+n {
		return answer{}, fmt.Errorf("%w: answer body of %d bytes, length says %d", ErrProtocol, len(b)-3, n)
	}
	body := b[3:]
	if b[0] == 1 {
		if n > maxReason || !utf8.Valid(body) {
			return answer{}, fmt.Errorf("%w: malformed refusal", ErrProtocol)
		}
		return answer{reason: string(body)}, nil
	}
	if n != 0 && n != mpctls.CheckpointSize {
		return answer{}, fmt.Errorf("%w: answer carries %d bytes", ErrProtocol, n)
	}
	a := answer{ok: true}
	if n != 0 {
		a.checkpoint = append([]byte(nil), body...)
	}
	return a, nil
}
