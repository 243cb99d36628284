package mpctls

import "fmt"

// typeKeyUpdate is the TLS 1.3 KeyUpdate handshake message type.
const typeKeyUpdate = 24

// ServerEpochs is the prover's own check of what it received: it opens
// every server record from sequence number from on (the Handshake's
// ServerProtectedFrom) under the server's application keys, following
// KeyUpdates, and returns the key epoch starts a Presentation needs.
// server holds the server-direction records in sequence order (records of
// the other direction are ignored). secret is as Presentation.Secret:
// server_application_traffic_secret_0 for TLS 1.3, the server write key
// and IV for TLS 1.2.
//
// Any record that does not authenticate fails with ErrDecrypt; a
// KeyUpdate that does not end its record, or handshake data left over at
// the end, with ErrHandshake.
func ServerEpochs(server []Record, version, suiteID uint16, secret []byte, from uint64) ([]uint64, error) {
	suite, err := suiteFor(version, suiteID)
	if err != nil {
		return nil, err
	}
	op, err := newPresentationOpener(suite, secret)
	if err != nil {
		return nil, err
	}
	starts := []uint64{from}
	var hs []byte // pending post-handshake message bytes (TLS 1.3)
	next := uint64(0)
	var buf []byte
	for _, r := range server {
		if r.Dir != ServerToClient || r.Seq < from {
			continue
		}
		if r.Seq != from+next {
			return nil, &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: fmt.Sprintf("expected sequence number %d", from+next), Err: ErrSequence}
		}
		next++
		start := starts[len(starts)-1]
		ct, pt, err := op.Open(buf[:0], r.Seq-start, r)
		if err != nil {
			return nil, err
		}
		buf = pt
		if version != VersionTLS13 || ct != RecordHandshake {
			if len(hs) != 0 && version == VersionTLS13 {
				return nil, &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: "handshake message interrupted", Err: ErrHandshake}
			}
			continue
		}
		hs = append(hs, pt...)
		update := false
		for len(hs) >= 4 {
			n := int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3])
			if n > maxHandshakeMessage {
				return nil, &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: "post-handshake message too large", Err: ErrHandshake}
			}
			if len(hs) < 4+n {
				break
			}
			if hs[0] == typeKeyUpdate {
				if n != 1 || len(hs) != 5 {
					return nil, &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: "key update does not end its record", Err: ErrHandshake}
				}
				update = true
			}
			hs = hs[4+n:]
		}
		if update {
			if secret, err = NextTrafficSecret(suite, secret); err != nil {
				return nil, err
			}
			if op, err = newPresentationOpener(suite, secret); err != nil {
				return nil, err
			}
			starts = append(starts, r.Seq+1)
		}
	}
	if len(hs) != 0 {
		return nil, fmt.Errorf("%w: server stream ends inside a handshake message", ErrHandshake)
	}
	if next == 0 {
		return nil, fmt.Errorf("%w: no server records from %d on", ErrTruncated, from)
	}
	if last := starts[len(starts)-1]; last == from+next {
		// A KeyUpdate in the very last record opens an epoch with no
		// records; presentations need no start for it.
		starts = starts[:len(starts)-1]
	}
	return starts, nil
}
