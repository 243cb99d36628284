package sqlstore

import (
	"bytes"
	"compress/flate"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"

	"github.com/acds-project/acds/store"
)

// Blob codecs of the SQLite backend (columns input_codec, result_codec).
const (
	codecRaw     = 0
	codecDeflate = 1 // raw DEFLATE (RFC 1951), written before schema version 7; read only
	codecS2      = 2 // the S2 block format of github.com/klauspost/compress/s2
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

// codecs compresses blobs with S2 (github.com/klauspost/compress/s2, an
// extension of Snappy), which on FHIR JSON runs about five times faster
// than DEFLATE level 1 — the compression runs on the accept path of every
// request — and compresses Synthea bundles better (48 KB against 71 KB of
// an 859 KB bundle); and reads both S2 and the DEFLATE of databases
// written before schema version 7, with reusable DEFLATE readers.
type codecs struct {
	readers sync.Pool
	limit   int // largest decoded value; 0 means maxDecoded
}

// compress returns b S2-compressed when that makes it at least an eighth
// smaller, else b itself; and the codec to store with it.
func (c *codecs) compress(b []byte) ([]byte, int) {
	if len(b) < compressMin {
		return b, codecRaw
	}
	out := s2.Encode(make([]byte, s2.MaxEncodedLen(len(b))), b)
	if len(out) > len(b)-len(b)/8 {
		return b, codecRaw
	}
	return out, codecS2
}

// decompress undoes compress.
func (c *codecs) decompress(b []byte, codec int) ([]byte, error) {
	limit := c.limit
	if limit <= 0 {
		limit = maxDecoded
	}
	switch codec {
	case codecRaw:
		return b, nil
	case codecS2:
		n, err := s2.DecodedLen(b)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", store.ErrCorrupt, err)
		}
		if n > limit {
			return nil, fmt.Errorf("%w: decodes to more than %d bytes", store.ErrCorrupt, limit)
		}
		out, err := s2.Decode(make([]byte, n), b)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", store.ErrCorrupt, err)
		}
		return out, nil
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
