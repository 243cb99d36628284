package r4

import (
	"fmt"
	"strconv"
)

// Primitive is implemented by the pointer types of all twenty FHIR primitive
// types (*String, *Date, *Boolean, *Decimal…). It gives generic access to a
// primitive's value in its JSON lexical form, for code that treats all
// primitives alike, such as a WalkFunc that blanks or rewrites values.
type Primitive interface {
	// PrimitiveType returns the FHIR type name, such as "dateTime".
	PrimitiveType() string
	// HasValue reports whether the primitive has a value.
	HasValue() bool
	// Text returns the value as FHIR JSON writes it, without quotes: the
	// string itself, "true"/"false", digits of an integer or decimal. It is
	// "" when there is no value.
	Text() string
	// SetText sets the value from its lexical form. Booleans, integers and
	// decimals return an error matching ErrInvalidValue for text of the
	// wrong form; strings are taken as they are (formats are validation's
	// job).
	SetText(s string) error
	// Clear removes the value, keeping the element id and extensions.
	Clear()
}

func boolText(v, has bool) string {
	switch {
	case !has:
		return ""
	case v:
		return "true"
	}
	return "false"
}

func parseBoolText(s string) (bool, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%w: %q is not a boolean", ErrInvalidValue, s)
}

func intText(v int64, has bool) string {
	if !has {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

func parseIntText(s string) (int64, error) {
	d := decoder{data: []byte(s), chunkSize: len(s) + 64}
	v, err := d.intValue()
	if err != nil || d.pos != len(s) {
		return 0, fmt.Errorf("%w: %q is not an integer", ErrInvalidValue, s)
	}
	return v, nil
}

func errNotNumber(s string) error {
	return fmt.Errorf("%w: %q is not a decimal number", ErrInvalidValue, s)
}
