package mpctls

import (
	"bytes"
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// cborCodec holds the CBOR modes of this package: core deterministic
// encoding (RFC 8949 §4.2.1) and a strict decoder (no duplicate keys, no
// unknown fields, no indefinite lengths, no tags, bounded nesting).
type cborCodec struct {
	enc cbor.EncMode
	dec cbor.DecMode
}

func newCodec(maxElems int) cborCodec {
	enc, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic("mpctls: cbor encoder options: " + err.Error()) // constant options; cannot fail
	}
	dec, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   8,
		MaxArrayElements:  maxElems,
		MaxMapPairs:       64,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic("mpctls: cbor decoder options: " + err.Error()) // constant options; cannot fail
	}
	return cborCodec{enc: enc, dec: dec}
}

// decodeCanonical decodes b into v and insists that b is exactly the
// deterministic encoding of v, so every value has one accepted encoding.
func (c cborCodec) decodeCanonical(b []byte, v any, class error) error {
	if err := c.dec.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", class, err)
	}
	again, err := c.enc.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: %w", class, err)
	}
	if !bytes.Equal(again, b) {
		return fmt.Errorf("%w: not in deterministic cbor encoding", class)
	}
	return nil
}
