package r4

//go:generate sh -c "../../scripts/fetch-fhir-defs.sh && go run ../../internal/gen/fhirgen -defs ../../.fhir-defs/package -out ."

import (
	"encoding/json"
)

// Resource is any FHIR R4 resource: *Patient, *Bundle, *Observation and the
// other generated resource types. Only this package's types implement it.
type Resource interface {
	// ResourceType returns the R4 resource type name, such as "Patient".
	ResourceType() string
	// ResourceID returns the logical id ("" if none).
	ResourceID() string
	// SetResourceID sets the logical id.
	SetResourceID(id string)
	json.Marshaler
	json.Unmarshaler

	decodeMembers(d *decoder, first bool) error
	encodeMembers(e *encoder)
	encodeCanonical(e *encoder)
	walk(w *walker)
	walkID() string
	refs(r *refWalker)
	isNil() bool
	size() int
}

// isNull reports whether data is the JSON literal null (with white space).
func isNull(data []byte) bool {
	d := decoder{data: data}
	d.skipWS()
	if !d.null() {
		return false
	}
	d.skipWS()
	return d.pos == len(data)
}

// Default limits used by Unmarshal and by an Options zero value.
const (
	// DefaultMaxDepth is the default nesting limit for objects and arrays.
	DefaultMaxDepth = 100
	// DefaultMaxBytes is the default input size limit.
	DefaultMaxBytes = 64 << 20
	// DefaultModelFactor times the input size, plus 1 MiB, is the default
	// memory limit for the decoded model (see Options.MaxModelBytes). The
	// official R4 examples need at most about 10 times their compact JSON
	// size (those over 100 KB; 13.5 times for those over 20 KB), Synthea
	// bundles less than 5 times.
	DefaultModelFactor = 16
	// DefaultMaxErrors is the default number of errors Options.Decode
	// records.
	DefaultMaxErrors = 1000
)

// Options sets decoding limits. The zero value is ready to use.
type Options struct {
	// MaxDepth is the deepest nesting of JSON objects and arrays accepted.
	// Zero means DefaultMaxDepth (100).
	MaxDepth int
	// MaxBytes is the largest input accepted. Zero means DefaultMaxBytes
	// (64 MiB).
	MaxBytes int
	// MaxModelBytes caps the memory decoding allocates for the Go values
	// it builds, since a small JSON object can decode into a much larger
	// struct: {"url":"a"} is 11 bytes of JSON and an Extension of about 450
	// bytes. It counts what is allocated, not just what is kept: structs,
	// the blocks strings are packed into, and every backing array a slice
	// of the model has had, at its full capacity (slices grow by doubling,
	// so the arrays of one slice add up to less than four times its items).
	// Decoding stops with ErrLimit before it would go over, so input built
	// to expand costs about this much memory and proportionate time at
	// most. Zero means DefaultModelFactor times the input size plus 1 MiB.
	MaxModelBytes int
	// Borrow makes the strings of the decoded model share the input's
	// memory where they are a part of it, instead of being copied: data
	// must then not change while the model is in use, and the model keeps
	// all of data alive. For a model that is inspected and dropped (a
	// check that only needs the verdict); decoding stops at the same
	// inputs either way (MaxModelBytes counts the copies not made).
	Borrow bool
	// MaxErrors is the most errors Decode records. Zero means
	// DefaultMaxErrors (1000). Past it, Decode records one more
	// *DecodeError of class ErrLimit saying so and stops. Unmarshal does not
	// use it.
	MaxErrors int
}

// Unmarshal decodes one FHIR R4 resource from JSON with the default limits.
// See Options.Unmarshal.
func Unmarshal(data []byte) (Resource, error) { return Options{}.Unmarshal(data) }

// Unmarshal decodes one FHIR R4 resource (of any type, including a Bundle)
// from JSON, dispatching on its resourceType.
//
// Decoding is strict and lossless: every member must be one R4 defines at
// that place, with the JSON type R4 gives it. Unknown members are not
// dropped, they fail the decode with ErrUnknownProperty; the error's Path
// names the member (Patient.name[0].foo). Codes are not checked against their
// value sets and formats of dates, ids and the like are not checked: that is
// validation's job, not decoding's. Decimals keep their text as written.
//
// Every error is a *DecodeError; match its class with errors.Is against
// ErrSyntax, ErrUnknownProperty, ErrInvalidValue, ErrDuplicateProperty,
// ErrMissingResourceType, ErrNotR4 or ErrLimit. Unmarshal stops at the first
// error; Decode goes on and reports them all.
//
// Decoded strings are packed into a few shared blocks of memory rather than
// allocated one by one; data itself is not retained and may be reused by the
// caller once Unmarshal returns.
func (o Options) Unmarshal(data []byte) (Resource, error) {
	d, err := o.newDecoder(data)
	if err != nil {
		return nil, err
	}
	d.skipWS()
	r, err := d.resourceValue(nil)
	if err == nil {
		err = d.end()
	}
	if err != nil {
		return nil, finishError(err)
	}
	return r, nil
}

// Decode decodes data like Unmarshal, but a problem inside a member does not
// stop it: the problem is recorded, the offending member or array item is
// skipped (the element is left unset, or as far as it decoded) and decoding
// goes on with the next one, so that one pass reports every structural
// problem of the document. Errors are returned in document order, each with
// its full Path from the root, Offset, Reason, class and NotR4, as Unmarshal
// reports them; the first is the error Unmarshal returns for the same input.
//
// Recoverable, and recorded at the innermost member or item that contains
// them: unknown properties, wrong JSON types, invalid numbers and booleans,
// invalid UTF-8, duplicate properties (the first is kept), empty objects and
// arrays, misplaced nulls, "_" companion arrays of the wrong length, DSTU2
// and STU3 element shapes, and nested resources (contained, Bundle entries,
// Parameters, outcomes) without a resourceType or with one that is not R4:
// such a resource is left out.
//
// Fatal, ending decoding with a nil Resource and the fatal error last in the
// list: malformed JSON (ErrSyntax), limits (ErrLimit: input size, nesting
// depth, model size, MaxErrors), and a root that is not a resource object
// with an R4 resourceType.
//
// With no errors, the Resource is the one Unmarshal returns. With only
// recoverable errors, it is the document without the offending parts.
//
// The model's primitives with a string value are allocated in blocks of
// up to 128, one allocation for many: a primitive kept after the rest of
// its model is dropped keeps its block's memory in use.
func (o Options) Decode(data []byte) (Resource, []*DecodeError) {
	d, err := o.newDecoder(data)
	if err != nil {
		return nil, []*DecodeError{err.(*DecodeError)}
	}
	d.collect, d.badKeys = true, true
	d.maxErrors = o.MaxErrors
	if d.maxErrors <= 0 {
		d.maxErrors = DefaultMaxErrors
	}
	d.skipWS()
	start := d.pos
	r, err := d.resourceValue(nil)
	fatal := false
	if err != nil && !kept(err) {
		// A problem with the root itself, or a fatal one.
		r = nil
		if m := d.record(err); m.abandoned {
			// Report malformed JSON after the problem, if any.
			d.pos, d.depth = start, 0
			if err := d.skipValue(); err != nil {
				d.errs = append(d.errs, err.(*DecodeError))
			}
		}
		last := d.errs[len(d.errs)-1].Err
		fatal = last == ErrSyntax || last == ErrLimit
	}
	if !fatal {
		if err := d.end(); err != nil {
			d.errs = append(d.errs, err.(*DecodeError))
			r = nil
		}
	}
	for _, e := range d.errs {
		e.finish()
	}
	return r, d.errs
}

func (o Options) newDecoder(data []byte) (*decoder, error) {
	maxBytes, maxDepth := o.MaxBytes, o.MaxDepth
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if len(data) > maxBytes {
		return nil, &DecodeError{Reason: "input larger than " + itoa(maxBytes) + " bytes", Err: ErrLimit}
	}
	maxModel := o.MaxModelBytes
	if maxModel <= 0 {
		maxModel = DefaultModelFactor*len(data) + 1<<20
	}
	d := &decoder{data: data, chunkSize: min(max(len(data)/4, 512), 64<<10), maxDepth: maxDepth, maxModel: maxModel, borrow: o.Borrow}
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		// A UTF-8 byte order mark, which editors on some systems write and
		// RFC 8259 lets a parser ignore.
		d.pos = 3
	}
	return d, nil
}

// end checks that nothing but white space follows the value.
func (d *decoder) end() error {
	d.skipWS()
	if d.pos != len(d.data) {
		return d.fail(ErrSyntax, "unexpected data after the top-level value")
	}
	return nil
}

func finishError(err error) error {
	if de, ok := err.(*DecodeError); ok {
		de.finish()
	}
	return err
}

func itoa(n int) string {
	b := make([]byte, 0, 20)
	e := encoder{buf: b}
	e.integer(int64(n))
	return string(e.buf)
}

// Marshal encodes r as FHIR JSON: resourceType first, then the members in
// the order of the R4 definitions, no empty objects, arrays or absent values,
// strings escaped as RFC 8785 does. Decimals are written as stored.
func Marshal(r Resource) ([]byte, error) { return Append(nil, r) }

// Append is Marshal appending to dst.
func Append(dst []byte, r Resource) ([]byte, error) {
	if r == nil || r.isNil() {
		return dst, &EncodeError{Reason: "nil resource"}
	}
	e := encoder{buf: dst}
	if e.buf == nil {
		e.buf = make([]byte, 0, 4096)
	}
	e.buf = append(e.buf, '{')
	r.encodeMembers(&e)
	e.buf = append(e.buf, '}')
	if e.err != nil {
		return nil, &EncodeError{Reason: e.err.Error(), Err: e.err}
	}
	return e.buf, nil
}

// EncodeError reports a value that cannot be written as FHIR JSON, such as a
// Decimal whose text is not a number.
type EncodeError struct {
	// Reason says what is wrong.
	Reason string
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *EncodeError) Error() string { return "fhir r4: encode: " + e.Reason }

// Unwrap returns the underlying error.
func (e *EncodeError) Unwrap() error { return e.Err }

// New returns a new empty resource of the named type, or an error matching
// ErrNotR4 if R4 has no such resource type.
func New(resourceType string) (Resource, error) {
	r := newResource(resourceType)
	if r == nil {
		return nil, &DecodeError{Reason: "resourceType " + strconvQuote(resourceType) + " is not an R4 resource type", Err: ErrNotR4}
	}
	return r, nil
}

func strconvQuote(s string) string {
	e := encoder{buf: make([]byte, 0, len(s)+2)}
	e.str(s)
	return string(e.buf)
}

// IsResourceType reports whether name is an R4 resource type.
func IsResourceType(name string) bool { return newResource(name) != nil }

// ResourceTypes returns the names of all R4 resource types, sorted.
func ResourceTypes() []string { return append([]string(nil), resourceTypes[:]...) }

// DataTypes returns the names of all R4 complex data types, sorted.
func DataTypes() []string { return append([]string(nil), dataTypes[:]...) }

func marshalResource(r Resource) ([]byte, error) {
	if r.isNil() {
		return []byte("null"), nil
	}
	return Marshal(r)
}

func unmarshalResourceInto(data []byte, r Resource) error {
	d, err := Options{}.newDecoder(data)
	if err != nil {
		return err
	}
	d.skipWS()
	_, err = d.resourceValue(r)
	if err == nil {
		err = d.end()
	}
	return finishError(err)
}

func marshalObject(x objectCodec) ([]byte, error) {
	e := encoder{buf: make([]byte, 0, 256)}
	e.buf = append(e.buf, '{')
	x.encodeMembers(&e)
	e.buf = append(e.buf, '}')
	if e.err != nil {
		return nil, &EncodeError{Reason: e.err.Error(), Err: e.err}
	}
	return e.buf, nil
}

func unmarshalObject(data []byte, typeName string, x objectCodec) error {
	d, err := Options{}.newDecoder(data)
	if err != nil {
		return err
	}
	d.skipWS()
	err = d.openObject()
	if err == nil {
		err = x.decodeMembers(d, true)
	}
	if err == nil {
		err = d.end()
	}
	if err != nil {
		return finishError(resourceError(err, typeName))
	}
	return nil
}
