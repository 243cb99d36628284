package sqlstore

import (
	"bytes"
	"compress/flate"
	"crypto/rand"
	"errors"
	"testing"

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
		{"json", json, codecDeflate},
		{"random", random, codecRaw},
	} {
		enc, codec := c.compress(tc.in)
		if codec != tc.codec {
			t.Errorf("%s: codec %d, want %d", tc.name, codec, tc.codec)
		}
		if codec == codecDeflate && len(enc) >= len(tc.in)/4 {
			t.Errorf("%s: %d bytes compressed to %d", tc.name, len(tc.in), len(enc))
		}
		dec, err := c.decompress(enc, codec)
		if err != nil || !bytes.Equal(dec, tc.in) {
			t.Errorf("%s: round trip failed: %v", tc.name, err)
		}
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
}

// FuzzDecompress: stored values are read back through the decoder, so a
// damaged database must give ErrCorrupt, never a panic or a huge buffer.
// The seeds below are replayed by plain `go test`.
func FuzzDecompress(f *testing.F) {
	var c codecs
	enc, _ := c.compress(bytes.Repeat([]byte(`{"resourceType":"Bundle"},`), 100))
	f.Add(enc, codecDeflate)
	f.Add([]byte{0x01, 0x00, 0x00, 0xff, 0xff}, codecDeflate) // stored empty block
	f.Add([]byte("plain"), codecRaw)
	f.Add([]byte{}, 2)
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
