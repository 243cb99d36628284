package sqlstore

import (
	"bytes"
	"compress/flate"
	"fmt"
	"io"
	"sync"

	kflate "github.com/klauspost/compress/flate"

	"github.com/acds-project/acds/store"
)

// Blob codecs of the SQLite backend (columns input_codec, result_codec).
const (
	codecRaw     = 0
	codecDeflate = 1
)

const (
	// compressMin: smaller blobs are stored as given; compressing them
	// saves too little to pay for itself.
	compressMin = 512
	// maxDecoded bounds a decompressed blob, so that a damaged or
	// tampered database cannot make a read allocate without limit. The
	// server's largest body is 32 MiB.
	maxDecoded = 64 << 20
)

// codecs holds reusable DEFLATE writers and readers (allocating a
// compressor per write would cost more than the compression). Writing uses
// github.com/klauspost/compress/flate at level 1: the same raw DEFLATE
// format (RFC 1951) as compress/flate, which reads it, at about twice the
// speed of compress/flate's BestSpeed and a similar ratio on FHIR JSON
// (the compression runs on the accept path of every request).
type codecs struct {
	writers sync.Pool
	readers sync.Pool
	limit   int // largest decoded value; 0 means maxDecoded
}

// compress returns b deflated at level 1 when that makes it at least an
// eighth smaller, else b itself; and the codec to store with it.
func (c *codecs) compress(b []byte) ([]byte, int) {
	if len(b) < compressMin {
		return b, codecRaw
	}
	var buf bytes.Buffer
	buf.Grow(len(b) / 4)
	w, _ := c.writers.Get().(*kflate.Writer)
	if w == nil {
		w, _ = kflate.NewWriter(&buf, kflate.BestSpeed) // cannot fail for a valid level
	} else {
		w.Reset(&buf)
	}
	_, werr := w.Write(b)
	cerr := w.Close()
	c.writers.Put(w)
	if werr != nil || cerr != nil || buf.Len() > len(b)-len(b)/8 {
		return b, codecRaw
	}
	return buf.Bytes(), codecDeflate
}

// decompress undoes compress.
func (c *codecs) decompress(b []byte, codec int) ([]byte, error) {
	switch codec {
	case codecRaw:
		return b, nil
	case codecDeflate:
	default:
		return nil, fmt.Errorf("%w: unknown codec %d", store.ErrCorrupt, codec)
	}
	src := bytes.NewReader(b)
	r, _ := c.readers.Get().(io.ReadCloser)
	if r == nil {
		r = flate.NewReader(src)
	} else if err := r.(flate.Resetter).Reset(src, nil); err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrCorrupt, err)
	}
	defer c.readers.Put(r)
	limit := c.limit
	if limit <= 0 {
		limit = maxDecoded
	}
	var out bytes.Buffer
	out.Grow(min(len(b)*8, limit))
	n, err := out.ReadFrom(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrCorrupt, err)
	}
	if n > int64(limit) {
		return nil, fmt.Errorf("%w: decodes to more than %d bytes", store.ErrCorrupt, limit)
	}
	return out.Bytes(), nil
}
