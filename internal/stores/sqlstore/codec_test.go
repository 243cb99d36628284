package sqlstore

import (
	"bytes"
	"compress/flate"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/acds-project/acds/store"
)

func TestCodecRoundTrip(t *testing.T) {
	var c codecs
	json := bytes.Repeat([]byte(`{"resourceType":"Observation","status":"final"},`), 400)
	random := make([]byte, 4096)
	_, _ = rand.Read(random)
	for _, tc := range []struct {
		name  string
		in    []byte
		codec int
	}{
		{"small", []byte(`{"a":1}`), codecRaw},
		{"empty", nil, codecRaw},
		{"json", json, codecS2},
		{"random", random, codecRaw},
	} {
		enc, codec := c.compress(tc.in)
		if codec != tc.codec {
			t.Errorf("%s: codec %d, want %d", tc.name, codec, tc.codec)
		}
		if codec == codecS2 && len(enc) >= len(tc.in)/4 {
			t.Errorf("%s: %d bytes compressed to %d", tc.name, len(tc.in), len(enc))
		}
		dec, err := c.decompress(enc, codec)
		if err != nil || !bytes.Equal(dec, tc.in) {
			t.Errorf("%s: round trip failed: %v", tc.name, err)
		}
	}
}

// deflated is b as raw DEFLATE, as codec 1 values were written before
// schema version 7.
func deflated(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestSpeed)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// Values written before schema version 7 are raw DEFLATE, and still read.
func TestCodecReadsDeflate(t *testing.T) {
	var c codecs
	in := bytes.Repeat([]byte(`{"resourceType":"Observation","status":"final"},`), 400)
	out, err := c.decompress(deflated(in), codecDeflate)
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("DEFLATE value: %v", err)
	}
}

func TestCodecRejects(t *testing.T) {
	c := codecs{limit: 1 << 20}
	if _, err := c.decompress([]byte("not deflate at all"), codecDeflate); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("garbage: %v", err)
	}
	if _, err := c.decompress(nil, 7); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("unknown codec: %v", err)
	}
	// A bomb: more than the limit of zeros compresses to little.
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestSpeed)
	zeros := make([]byte, 64<<10)
	for range c.limit/len(zeros) + 1 {
		_, _ = w.Write(zeros)
	}
	_ = w.Close()
	if _, err := c.decompress(buf.Bytes(), codecDeflate); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("bomb of %d bytes: %v", buf.Len(), err)
	}
	if _, err := c.decompress([]byte("not s2 at all"), codecS2); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("garbage as S2: %v", err)
	}
	// An S2 block that declares more than the limit is refused before
	// anything is allocated for it, and one that is cut short is corrupt.
	big := s2.Encode(nil, make([]byte, c.limit+1))
	if _, err := c.decompress(big, codecS2); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("S2 bomb of %d bytes: %v", len(big), err)
	}
	small := s2.Encode(nil, bytes.Repeat([]byte("abcdefgh"), 1000))
	if _, err := c.decompress(small[:len(small)-3], codecS2); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("S2 cut short: %v", err)
	}
}

// FuzzDecompress: stored values are read back through the decoder, so a
// damaged database must give ErrCorrupt, never a panic or a value above
// maxDecoded (an S2 block is given the room its header declares, up to
// that limit, before it is decoded).
// The seeds below are replayed by plain `go test`.
func FuzzDecompress(f *testing.F) {
	var c codecs
	enc, _ := c.compress(bytes.Repeat([]byte(`{"resourceType":"Bundle"},`), 100))
	f.Add(enc, codecS2)
	f.Add(deflated(bytes.Repeat([]byte(`{"resourceType":"Bundle"},`), 100)), codecDeflate)
	f.Add([]byte{0x01, 0x00, 0x00, 0xff, 0xff}, codecDeflate) // stored empty block
	f.Add([]byte("plain"), codecRaw)
	f.Add([]byte{}, codecS2)
	f.Add([]byte{0xff, 0xff, 0xff, 0x1f}, codecS2) // declares 64 MiB, holds nothing
	f.Fuzz(func(t *testing.T, b []byte, codec int) {
		out, err := c.decompress(b, codec)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if len(out) > maxDecoded {
			t.Fatalf("decoded %d bytes", len(out))
		}
		if codec == codecRaw && !bytes.Equal(out, b) {
			t.Fatal("raw value changed")
		}
	})
}
