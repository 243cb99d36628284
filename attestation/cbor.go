package attestation

import (
	"bytes"
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// The CBOR modes are immutable after construction; they hold no state that
// changes at run time.
var (
	detEnc = mustEncMode()
	strict = mustDecMode()
)

func mustEncMode() cbor.EncMode {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err) // constant options: cannot fail
	}
	return em
}

func mustDecMode() cbor.DecMode {
	dm, err := cbor.DecOptions{
		DupMapKey:       cbor.DupMapKeyEnforcedAPF,
		IndefLength:     cbor.IndefLengthForbidden,
		TagsMd:          cbor.TagsForbidden,
		MaxNestedLevels: 8,
		// A fetch's coverage lists up to 4096 requests; every other array
		// is bounded far lower by its own check. Each element costs input
		// bytes, which every caller bounds first.
		MaxArrayElements:  4096,
		MaxMapPairs:       32,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err) // constant options: cannot fail
	}
	return dm
}

// MarshalDeterministic encodes v with the Core Deterministic Encoding of
// RFC 8949 §4.2. Other ACDS packages use it for their own signed structures.
func MarshalDeterministic(v any) ([]byte, error) {
	return detEnc.Marshal(v)
}

// UnmarshalStrict decodes data into v (a pointer to a struct with integer
// CBOR keys) and fails unless data is at most limit bytes, has no unknown,
// duplicate or indefinite-length items, no tags, no trailing bytes, and is
// exactly the deterministic encoding of what was decoded. what names the
// structure in errors.
func UnmarshalStrict(data []byte, v any, limit int, what string) error {
	if len(data) > limit {
		return fmt.Errorf("%s: %d bytes exceeds the limit of %d: %w", what, len(data), limit, ErrTooLarge)
	}
	if len(data) == 0 {
		return fmt.Errorf("%s: empty input: %w", what, ErrMalformed)
	}
	if err := strict.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w: %w", what, ErrMalformed, err)
	}
	again, err := detEnc.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: re-encoding: %w: %w", what, ErrMalformed, err)
	}
	if !bytes.Equal(again, data) {
		return fmt.Errorf("%s: not in deterministic CBOR encoding: %w", what, ErrMalformed)
	}
	return nil
}
