package attestation

import (
	"encoding/base64"
	"fmt"
)

// MaxBundleTextSize bounds the input of [ReadBundle]: a bundle of
// MaxBundleSize in base64, wrapped in lines of 32 characters or more,
// with a little room for quotes and a prefix. Readers of bundle files
// read at most this much.
const MaxBundleTextSize = (MaxBundleSize+2)/3*4*33/32 + 4<<10

// ReadBundle returns the CBOR bytes of a bundle as it is saved, pasted or
// sent: raw CBOR (a CBOR map), or base64 in the standard or URL alphabet,
// padded or not, with white space anywhere, optionally in double quotes
// (a JSON string copied whole) and with a "base64:" prefix. It is the one
// reading of a bundle's text for `acds verify`, the examples and POST
// /v1/verify.
//
// Input over MaxBundleTextSize, or a decoding over MaxBundleSize, is
// [ErrTooLarge]; anything else that is neither form is [ErrMalformed].
// ReadBundle does not parse the bundle: [ParseBundle] and the verifier do.
// Raw CBOR is returned as data itself, not a copy.
func ReadBundle(data []byte) ([]byte, error) {
	if len(data) > MaxBundleTextSize {
		return nil, fmt.Errorf("%w: bundle text of %d bytes, more than %d", ErrTooLarge, len(data), MaxBundleTextSize)
	}
	if len(data) > 0 && data[0] >= 0xa0 && data[0] <= 0xbf { // major type 5: a map
		if len(data) > MaxBundleSize {
			return nil, fmt.Errorf("%w: bundle of %d bytes, more than %d", ErrTooLarge, len(data), MaxBundleSize)
		}
		return data, nil
	}
	text := make([]byte, 0, len(data))
	url := false
	for _, c := range data {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '-', '_':
			url = true
		}
		text = append(text, c)
	}
	if n := len(text); n >= 2 && text[0] == '"' && text[n-1] == '"' {
		text = text[1 : n-1]
	}
	if len(text) >= 7 && string(text[:7]) == "base64:" {
		text = text[7:]
	}
	for len(text) > 0 && text[len(text)-1] == '=' {
		text = text[:len(text)-1]
	}
	enc := base64.RawStdEncoding
	if url {
		enc = base64.RawURLEncoding
	}
	out := make([]byte, enc.DecodedLen(len(text)))
	n, err := enc.Decode(out, text)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: bundle is neither raw CBOR nor base64: %v", ErrMalformed, err)
	case n == 0:
		return nil, fmt.Errorf("%w: empty bundle", ErrMalformed)
	case n > MaxBundleSize:
		return nil, fmt.Errorf("%w: bundle of %d bytes, more than %d", ErrTooLarge, n, MaxBundleSize)
	}
	return out[:n], nil
}
