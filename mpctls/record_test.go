package mpctls

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// rec builds a well-formed record of direction dir and type typ whose
// fragment is frag.
func rec(dir Direction, seq uint64, typ uint8, frag []byte) Record {
	raw := append([]byte{typ, 3, 3, byte(len(frag) >> 8), byte(len(frag))}, frag...)
	return Record{Dir: dir, Seq: seq, Type: typ, Version: 0x0303, Raw: raw}
}

func TestRecordReader(t *testing.T) {
	var stream []byte
	want := []Record{
		rec(ServerToClient, 0, RecordHandshake, []byte{2, 0, 0, 0}),
		rec(ServerToClient, 1, RecordChangeCipherSpec, []byte{1}),
		rec(ServerToClient, 2, RecordApplicationData, bytes.Repeat([]byte{7}, MaxFragment)),
		rec(ServerToClient, 3, RecordAlert, []byte{1, 0}),
	}
	for _, r := range want {
		stream = append(stream, r.Raw...)
	}
	rr := NewRecordReader(bytes.NewReader(stream), ServerToClient)
	for i, w := range want {
		got, err := rr.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if got.Seq != w.Seq || got.Type != w.Type || got.Version != w.Version || !bytes.Equal(got.Raw, w.Raw) || got.Dir != ServerToClient {
			t.Fatalf("record %d: got %+v", i, got)
		}
	}
	if _, err := rr.Next(); err != io.EOF {
		t.Fatalf("end: got %v, want io.EOF", err)
	}
}

func TestRecordReaderErrors(t *testing.T) {
	hs := rec(ClientToServer, 0, RecordHandshake, []byte{1, 0, 0, 0}).Raw
	cases := []struct {
		name   string
		stream []byte
		skip   int // records to read successfully first
		want   error
	}{
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 0, ErrNotTLS},
		{"first record not handshake", rec(ClientToServer, 0, RecordApplicationData, []byte{1}).Raw, 0, ErrNotTLS},
		{"first record change cipher spec", rec(ServerToClient, 0, RecordChangeCipherSpec, []byte{1}).Raw, 0, ErrNotTLS},
		{"ssl2-ish", []byte{0x80, 0x2e, 0x01, 0x03, 0x01}, 0, ErrNotTLS},
		{"unknown type", append(append([]byte{}, hs...), 24, 3, 3, 0, 1, 0), 1, ErrUnknownRecordType},
		{"too large", append(append([]byte{}, hs...), 23, 3, 3, 0x48, 0x01), 1, ErrRecordTooLarge},
		{"empty fragment", append(append([]byte{}, hs...), 23, 3, 3, 0, 0), 1, ErrMalformedRecord},
		{"bad version", append(append([]byte{}, hs...), 23, 3, 4, 0, 1, 0), 1, ErrMalformedRecord},
		{"ssl3 version", append(append([]byte{}, hs...), 23, 3, 0, 0, 1, 0), 1, ErrMalformedRecord},
		{"truncated header", append(append([]byte{}, hs...), 23, 3), 1, ErrTruncated},
		{"truncated fragment", append(append([]byte{}, hs...), 23, 3, 3, 0, 9, 1, 2), 1, ErrTruncated},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rr := NewRecordReader(bytes.NewReader(c.stream), ClientToServer)
			for i := 0; i < c.skip; i++ {
				if _, err := rr.Next(); err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
			}
			_, err := rr.Next()
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var re *RecordError
			if !errors.As(err, &re) || re.Seq != uint64(c.skip) {
				t.Fatalf("want *RecordError for record %d, got %#v", c.skip, err)
			}
			if _, again := rr.Next(); !errors.Is(again, c.want) {
				t.Fatalf("error not sticky: %v", again)
			}
		})
	}
}

func TestRecordCheck(t *testing.T) {
	good := rec(ClientToServer, 0, RecordHandshake, []byte{1, 2, 3})
	if err := good.check(); err != nil {
		t.Fatal(err)
	}
	bad := []Record{
		{Dir: 0, Type: good.Type, Version: good.Version, Raw: good.Raw},
		{Dir: ClientToServer, Type: RecordAlert, Version: good.Version, Raw: good.Raw},
		{Dir: ClientToServer, Type: good.Type, Version: good.Version, Raw: good.Raw[:6]},
		{Dir: ClientToServer, Type: good.Type, Version: good.Version, Raw: good.Raw[:3]},
	}
	for i, r := range bad {
		if err := r.check(); !errors.Is(err, ErrMalformedRecord) {
			t.Errorf("case %d: got %v", i, err)
		}
	}
}

// TestRecordReaderNextInto checks that NextInto assembles records in the
// caller's buffer when it is large enough, allocates when it is not, and
// reads the same records as Next either way.
func TestRecordReaderNextInto(t *testing.T) {
	want := []Record{
		rec(ClientToServer, 0, RecordHandshake, []byte{1, 0, 0, 0}),
		rec(ClientToServer, 1, RecordApplicationData, bytes.Repeat([]byte{9}, MaxFragment)),
		rec(ClientToServer, 2, RecordApplicationData, []byte{1, 2, 3}),
	}
	var stream []byte
	for _, r := range want {
		stream = append(stream, r.Raw...)
	}
	rr := NewRecordReader(bytes.NewReader(stream), ClientToServer)
	big := make([]byte, 0, HeaderLen+MaxFragment)
	small := make([]byte, 0, 8)
	for i, w := range want {
		buf := big
		if i == 1 {
			buf = small // too small for the full-size record
		}
		got, err := rr.NextInto(buf)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if got.Seq != w.Seq || got.Type != w.Type || !bytes.Equal(got.Raw, w.Raw) {
			t.Fatalf("record %d: got %+v", i, got)
		}
		aliased := &got.Raw[0] == &buf[:1][0]
		if fits := cap(buf) >= len(w.Raw); aliased != fits {
			t.Fatalf("record %d: aliases the buffer %v, buffer fits %v", i, aliased, fits)
		}
	}
	if _, err := rr.NextInto(big); err != io.EOF {
		t.Fatalf("end: got %v, want io.EOF", err)
	}
}

// TestLeafHasher checks that a reused LeafHasher agrees with LeafHash.
func TestLeafHasher(t *testing.T) {
	var lh LeafHasher
	for i, r := range []Record{
		rec(ServerToClient, 0, RecordHandshake, []byte{2, 0, 0, 0}),
		rec(ServerToClient, 1, RecordApplicationData, bytes.Repeat([]byte{5}, 1000)),
		rec(ClientToServer, 0, RecordHandshake, []byte{1, 0, 0, 0}),
	} {
		if lh.Sum(r) != LeafHash(r) {
			t.Fatalf("record %d: LeafHasher and LeafHash disagree", i)
		}
	}
}
