package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/acds-project/acds"
)

// writeJSON writes v as JSON with status. HTML escaping is off so that
// embedded canonical FHIR output keeps its exact bytes.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only our own wire types are encoded here; this cannot happen
		// for them, but answer properly rather than half-write.
		writeProblem(w, acds.NewProblem(acds.ProblemInternal, "encoding the response failed"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// marshal encodes v as compact JSON without HTML escaping, so that
// embedded FHIR JSON (json.RawMessage) keeps its exact bytes.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeProblem writes p as application/problem+json, with Retry-After when set.
func writeProblem(w http.ResponseWriter, p *acds.Problem) {
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="acds"`)
	}
	b, err := json.Marshal(p)
	if err != nil {
		b = []byte(`{"type":"urn:acds:problem:internal","title":"Internal error","status":500}`)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(b, '\n'))
}

func fieldProblem(field, message string) *acds.Problem {
	p := acds.NewProblem(acds.ProblemInvalidRequest, fmt.Sprintf("%s: %s", field, message))
	p.Errors = []acds.FieldError{{Field: field, Message: message}}
	return p
}

// checkJSONContentType answers 415 when the request declares a body type
// other than JSON (application/json, or any application/*+json type such
// as application/fhir+json, accepted on purpose) or a charset other than
// utf-8: JSON text exchanged between systems is UTF-8 (RFC 8259 §8.1),
// and the body is never transcoded. A request without a Content-Type is
// read as JSON: SPEC §4.3 names no Content-Type for POST /v1/process, so
// a client written from it may send none.
func checkJSONContentType(r *http.Request) *acds.Problem {
	ct := r.Header.Get("Content-Type")
	if ct == "" || ct == "application/json" { // the usual case, without parsing
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || !(mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return acds.NewProblem(acds.ProblemUnsupportedMediaType, "Content-Type must be application/json (or a +json type such as application/fhir+json)")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return acds.NewProblem(acds.ProblemUnsupportedMediaType, "the Content-Type charset must be utf-8 or absent: JSON text is UTF-8 (RFC 8259 §8.1)")
	}
	return nil
}

// checkContentEncoding answers 415 when a request that has a body
// declares a Content-Encoding other than identity. The server does not
// decompress request bodies: a gzip body would otherwise be read as raw
// JSON and refused as malformed, which says nothing of the cause. It is
// decided before any byte of the body is read. The coding is named in
// the answer only when it is a short token.
func checkContentEncoding(r *http.Request) *acds.Problem {
	if r.ContentLength == 0 {
		return nil
	}
	for _, v := range r.Header.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			c = strings.TrimSpace(c)
			if c == "" || strings.EqualFold(c, "identity") {
				continue
			}
			if !isShortToken(c) {
				c = "other than identity"
			}
			return acds.NewProblem(acds.ProblemUnsupportedMediaType, "Content-Encoding "+c+" is not supported; send the body uncompressed")
		}
	}
	return nil
}

// isShortToken reports whether s is at most 32 letters, digits, '-', '.'
// or '_': a content coding name that is safe to repeat in an answer.
func isShortToken(s string) bool {
	if len(s) > 32 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// decodeBody strictly decodes the JSON body of r into dst: unknown fields,
// wrong types and trailing data are invalid-request naming the field;
// malformed JSON is invalid-json; more than limit bytes is payload-too-large,
// detected without reading the body whole. An empty body is allowed when
// optional is true (dst keeps its zero value).
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, dst any, optional bool) *acds.Problem {
	_, p := readBody(w, r, limit, dst, optional)
	return p
}

// readBody is decodeBody that also returns the body's bytes, as read.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, dst any, optional bool) ([]byte, *acds.Problem) {
	body, p := readLimited(w, r, limit, optional)
	if p != nil {
		return nil, p
	}
	if len(bytes.TrimSpace(body)) == 0 && optional {
		return body, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return nil, decodeProblem(err, limit)
	}
	// Exactly one JSON value: anything but whitespace after it is an error.
	if len(bytes.TrimSpace(body[dec.InputOffset():])) != 0 {
		p := acds.NewProblem(acds.ProblemInvalidRequest, "the body must hold exactly one JSON object; trailing data after it")
		p.Errors = []acds.FieldError{{Field: "", Message: "trailing data after the JSON object"}}
		return nil, p
	}
	// encoding/json keeps a repeated member's last value; refuse it, as
	// something in front of the server may have read the first.
	if name := duplicateMember(body); name != "" {
		return nil, duplicateProblem(name)
	}
	return body, nil
}

// firstChunk bounds the buffer readLimited allocates before any byte has
// arrived: a body that declares its length gets a buffer of that length
// (plus one byte, for the read that finds its end) when it is at most
// this, and of this size otherwise; a body of unknown length starts at
// minChunk. Either way a connection that declares 32 MiB and sends
// nothing holds at most firstChunk.
const (
	firstChunk = 64 << 10
	minChunk   = 4 << 10
)

// readLimited checks the media type and the content coding and reads the
// body, answering 413 as soon as it exceeds limit and invalid-json when it
// starts with a byte order mark. It reads in chunks as the bytes arrive:
// the buffer starts at no more than firstChunk, sized from the declared
// Content-Length within that bound (so a typical body is read into one
// allocation, without the copies of growing from 512 bytes), and beyond
// it grows with what was received, never with the declared
// Content-Length, which costs nothing to lie about. A body whose read
// deadline passes (see bodyGate) aborts the handler, closing the
// connection.
func readLimited(w http.ResponseWriter, r *http.Request, limit int64, optional bool) ([]byte, *acds.Problem) {
	if p := checkJSONContentType(r); p != nil {
		return nil, p
	}
	if p := checkContentEncoding(r); p != nil {
		return nil, p
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body, err := readChunked(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		if errors.Is(err, errBodyTimeout) {
			panic(http.ErrAbortHandler)
		}
		return nil, acds.NewProblem(acds.ProblemInvalidJSON, "the body could not be read")
	}
	// Both JSON decoders would only say "malformed JSON at byte 1" (or
	// 0); name the cause, which editors on Windows commonly add.
	if bytes.HasPrefix(body, utf8BOM) {
		return nil, acds.NewProblem(acds.ProblemInvalidJSON, "the body starts with a byte order mark, which JSON text must not (RFC 8259 §8.1); send it without one")
	}
	return body, nil
}

// utf8BOM is the UTF-8 encoding of U+FEFF, the byte order mark.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// readChunked reads rd to its end. The first buffer is declared+1 bytes
// when 0 ≤ declared < firstChunk, else firstChunk (minChunk when the
// length is unknown); a full buffer grows by doubling what was received,
// to at most limit+1 bytes (rd is expected to stop at limit).
func readChunked(rd io.Reader, declared, limit int64) ([]byte, error) {
	size := int64(firstChunk)
	switch {
	case declared < 0:
		size = minChunk
	case declared < firstChunk:
		size = declared + 1
	}
	ceiling := limit + 1
	if ceiling <= 0 { // limit is math.MaxInt64
		ceiling = limit
	}
	size = max(min(size, ceiling), 1)
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			grown := min(2*int64(cap(buf)), ceiling)
			if grown <= int64(cap(buf)) {
				grown = int64(cap(buf)) + minChunk
			}
			nb := make([]byte, len(buf), grown)
			copy(nb, buf)
			buf = nb
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func tooLarge(limit int64) *acds.Problem {
	return acds.NewProblem(acds.ProblemPayloadTooLarge, fmt.Sprintf("the body exceeds the limit of %d bytes", limit))
}

// decodeProblem maps an encoding/json error to a problem.
func decodeProblem(err error, limit int64) *acds.Problem {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		ute *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return tooLarge(limit)
	case errors.As(err, &se):
		return acds.NewProblem(acds.ProblemInvalidJSON, fmt.Sprintf("malformed JSON at byte %d", se.Offset))
	case errors.Is(err, io.EOF):
		return acds.NewProblem(acds.ProblemInvalidJSON, "the body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return acds.NewProblem(acds.ProblemInvalidJSON, "the JSON body ends early")
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			p := acds.NewProblem(acds.ProblemInvalidRequest, "the body must be a JSON object")
			p.Errors = []acds.FieldError{{Field: "", Message: "must be a JSON object, not " + ute.Value}}
			return p
		}
		return fieldProblem(field, fmt.Sprintf("must be %s, not %s", jsonKind(ute.Type), ute.Value))
	}
	// encoding/json reports unknown fields only as text: json: unknown field "x".
	if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, uerr := strconv.Unquote(msg)
		if uerr != nil {
			name = msg
		}
		return fieldProblem(name, "unknown field")
	}
	return acds.NewProblem(acds.ProblemInvalidJSON, "the body is not valid JSON")
}

func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64, reflect.Uint, reflect.Uint64:
		return "a number"
	case reflect.Slice:
		if t == reflect.TypeOf(json.RawMessage(nil)) {
			return "a JSON value"
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a different type"
}
