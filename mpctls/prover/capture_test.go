package prover

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/acds-project/acds/mpctls"
)

// FuzzSplitter cuts arbitrary bytes, fed in arbitrary chunks, into
// records: it must never panic, never lose or invent a byte, number
// records in order, and refuse oversized fragments.
func FuzzSplitter(f *testing.F) {
	f.Add([]byte{22, 3, 1, 0, 2, 1, 2, 23, 3, 3, 0, 1, 9}, uint8(3))
	f.Add([]byte{23, 3, 3, 0xff, 0xff, 0}, uint8(1))
	f.Add(bytes.Repeat([]byte{23, 3, 3, 0, 0}, 10), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		var mu sync.Mutex
		s := splitter{dir: mpctls.ServerToClient, mu: &mu, notify: make(chan struct{}, 1)}
		n := int(step)%64 + 1
		for i := 0; i < len(data); i += n {
			s.feed(data[i:min(i+n, len(data))])
		}
		var got []byte
		for i, r := range s.records {
			if r.Seq != uint64(i) || len(r.Raw) < mpctls.HeaderLen || len(r.Raw)-mpctls.HeaderLen > mpctls.MaxFragment {
				t.Fatalf("record %d malformed: seq %d len %d", i, r.Seq, len(r.Raw))
			}
			got = append(got, r.Raw...)
		}
		if s.err != nil {
			if !errors.Is(s.err, mpctls.ErrRecordTooLarge) {
				t.Fatalf("unexpected error %v", s.err)
			}
			if !bytes.HasPrefix(data, got) {
				t.Fatal("records are not a prefix of the input")
			}
			return
		}
		got = append(got, s.pending()...)
		if !bytes.Equal(got, data) {
			t.Fatal("records and remainder differ from the input")
		}
		if err := s.finish(); (err == nil) != (len(s.pending()) == 0) {
			t.Fatalf("finish: %v with %d bytes left", err, len(s.pending()))
		}
	})
}
