package r4

// Span is the byte range [Start, End) of an encoded value in a buffer.
type Span struct {
	Start, End int
}

// AppendCanonicalBundle is AppendCanonical for a Bundle that also reports
// where its entries went: entries[i] is the range, in the returned
// buffer, of the i-th item of the Bundle's "entry" array as written. An
// entry that encodes to nothing (no members) is left out of the array, as
// AppendCanonical leaves it out, and has no range. The bytes are those
// AppendCanonical writes; a producer that commits to each entry (selective
// disclosure) gets the entries without scanning the output for them.
// Nested Bundles' entries (a Bundle inside an entry) are not reported.
func AppendCanonicalBundle(buf []byte, b *Bundle) (out []byte, entries []Span, err error) {
	if b == nil {
		return buf, nil, &EncodeError{Reason: "nil resource"}
	}
	entries = make([]Span, 0, len(b.Entry))
	e := encoder{buf: buf, canonical: true, entries: &entries}
	if e.buf == nil {
		e.buf = make([]byte, 0, 4096)
	}
	e.buf = append(e.buf, '{')
	b.encodeCanonical(&e)
	e.buf = append(e.buf, '}')
	if e.err != nil {
		return buf, nil, &EncodeError{Reason: e.errPath(b.ResourceType()) + ": " + e.err.Error(), Err: e.err}
	}
	return e.buf, entries, nil
}
