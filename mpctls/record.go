package mpctls

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Direction says which peer sent a record.
type Direction uint8

// The two directions of a TLS connection. The zero Direction is invalid, so
// a forgotten field fails closed.
const (
	ClientToServer Direction = 1 // records the client (prover) sent
	ServerToClient Direction = 2 // records the server (portal) sent
)

// Valid reports whether d is ClientToServer or ServerToClient.
func (d Direction) Valid() bool { return d == ClientToServer || d == ServerToClient }

// String returns "client", "server" or, for invalid values, "direction(N)".
func (d Direction) String() string {
	switch d {
	case ClientToServer:
		return "client"
	case ServerToClient:
		return "server"
	}
	return fmt.Sprintf("direction(%d)", uint8(d))
}

// TLS record content types (RFC 8446 §5.1).
const (
	RecordChangeCipherSpec uint8 = 20
	RecordAlert            uint8 = 21
	RecordHandshake        uint8 = 22
	RecordApplicationData  uint8 = 23
)

// Record-layer limits.
const (
	// HeaderLen is the length of a TLS record header.
	HeaderLen = 5
	// MaxFragment is the largest fragment accepted: 2^14 plus the 2048
	// bytes of expansion TLS 1.2 allows for protected records (TLS 1.3
	// allows only 256, so this bound serves both).
	MaxFragment = 1<<14 + 2048
)

// Record is one TLS record exactly as it crossed the wire.
type Record struct {
	Dir     Direction // who sent it
	Seq     uint64    // index of the record in its direction, from 0
	Type    uint8     // content type from the header
	Version uint16    // legacy record version from the header
	Raw     []byte    // 5-byte header followed by the fragment, as on the wire
}

// Fragment returns the record's payload (Raw without the header).
func (r Record) Fragment() []byte {
	if len(r.Raw) < HeaderLen {
		return nil
	}
	return r.Raw[HeaderLen:]
}

// check verifies that the Raw bytes agree with the header fields and the
// record-layer rules. It is the single definition of a well-formed record,
// used by the reader, the transcript and the verifiers.
func (r Record) check() error {
	fail := func(err error, reason string) error {
		return &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: reason, Err: err}
	}
	if !r.Dir.Valid() {
		return fail(ErrMalformedRecord, "invalid direction")
	}
	if len(r.Raw) < HeaderLen {
		return fail(ErrMalformedRecord, "shorter than a record header")
	}
	typ, ver := r.Raw[0], binary.BigEndian.Uint16(r.Raw[1:3])
	n := int(binary.BigEndian.Uint16(r.Raw[3:5]))
	if typ != r.Type || ver != r.Version {
		return fail(ErrMalformedRecord, "header disagrees with record fields")
	}
	if err := checkHeader(typ, ver, n); err != nil {
		return &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: err.Error(), Err: errors.Unwrap(err)}
	}
	if len(r.Raw) != HeaderLen+n {
		return fail(ErrMalformedRecord, "length field disagrees with record size")
	}
	return nil
}

type headerError struct {
	reason string
	err    error
}

func (e *headerError) Error() string { return e.reason }
func (e *headerError) Unwrap() error { return e.err }

func checkHeader(typ uint8, ver uint16, n int) error {
	switch typ {
	case RecordChangeCipherSpec, RecordAlert, RecordHandshake, RecordApplicationData:
	default:
		return &headerError{fmt.Sprintf("content type %d", typ), ErrUnknownRecordType}
	}
	// 0x0301 appears on initial ClientHellos, 0x0303 everywhere in TLS 1.2
	// and 1.3. 0x0302 (TLS 1.1) is tolerated at the record layer only; the
	// handshake check refuses the protocol itself.
	if ver < 0x0301 || ver > 0x0303 {
		return &headerError{fmt.Sprintf("record version %#04x", ver), ErrMalformedRecord}
	}
	if n > MaxFragment {
		return &headerError{fmt.Sprintf("fragment of %d bytes", n), ErrRecordTooLarge}
	}
	if n == 0 {
		return &headerError{"empty fragment", ErrMalformedRecord}
	}
	return nil
}

// RecordReader splits a byte stream of one direction into TLS records.
// It is strict: the first record must be a handshake record (or an
// alert, with which a server refuses a hello), every header
// must carry a known type, a plausible version and a fragment between 1 and
// MaxFragment bytes. It never reads more than one record ahead and holds no
// more than one record in memory.
type RecordReader struct {
	r   io.Reader
	dir Direction
	seq uint64
	hdr [HeaderLen]byte
	err error
}

// NewRecordReader returns a reader of the records of direction dir in r.
func NewRecordReader(r io.Reader, dir Direction) *RecordReader {
	return &RecordReader{r: r, dir: dir}
}

// Next returns the next record. At a clean end of stream (between records)
// it returns io.EOF; a stream that ends inside a record gives an error
// wrapping ErrTruncated. After any error, Next keeps returning it.
// The returned Raw is freshly allocated and owned by the caller.
func (rr *RecordReader) Next() (Record, error) {
	return rr.NextInto(nil)
}

// NextInto is Next, but assembles the record in buf when buf has the
// capacity for it (HeaderLen+MaxFragment always suffices), so a caller
// that recycles its buffers reads records without allocating. The
// returned Raw then aliases buf; otherwise it is freshly allocated.
func (rr *RecordReader) NextInto(buf []byte) (Record, error) {
	if rr.err != nil {
		return Record{}, rr.err
	}
	rec, err := rr.next(buf)
	if err != nil {
		rr.err = err
		return Record{}, err
	}
	rr.seq++
	return rec, nil
}

func (rr *RecordReader) next(buf []byte) (Record, error) {
	if !rr.dir.Valid() {
		return Record{}, fmt.Errorf("%w: invalid direction %d", ErrMalformedRecord, rr.dir)
	}
	fail := func(err error, reason string) error {
		return &RecordError{Dir: rr.dir, Seq: rr.seq, Reason: reason, Err: err}
	}
	n, err := io.ReadFull(rr.r, rr.hdr[:])
	switch {
	case err == io.EOF:
		return Record{}, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Record{}, fail(ErrTruncated, fmt.Sprintf("stream ends after %d header bytes", n))
	case err != nil:
		return Record{}, fmt.Errorf("mpctls: reading %s record %d: %w", rr.dir, rr.seq, err)
	}
	typ, ver := rr.hdr[0], binary.BigEndian.Uint16(rr.hdr[1:3])
	length := int(binary.BigEndian.Uint16(rr.hdr[3:5]))
	// A stream starts with a hello, or with the alert a server answers a
	// hello it refuses with.
	if rr.seq == 0 && (typ != RecordHandshake && typ != RecordAlert || rr.hdr[1] != 3) {
		return Record{}, fail(ErrNotTLS, fmt.Sprintf("first bytes %x are not a tls handshake record", rr.hdr[:]))
	}
	if err := checkHeader(typ, ver, length); err != nil {
		return Record{}, fail(errors.Unwrap(err), err.Error())
	}
	var raw []byte
	if cap(buf) >= HeaderLen+length {
		raw = buf[:HeaderLen+length]
	} else {
		raw = make([]byte, HeaderLen+length)
	}
	copy(raw, rr.hdr[:])
	if _, err := io.ReadFull(rr.r, raw[HeaderLen:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return Record{}, fail(ErrTruncated, "stream ends inside the fragment")
		}
		return Record{}, fmt.Errorf("mpctls: reading %s record %d: %w", rr.dir, rr.seq, err)
	}
	return Record{Dir: rr.dir, Seq: rr.seq, Type: typ, Version: ver, Raw: raw}, nil
}
