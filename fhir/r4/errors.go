package r4

import (
	"errors"
	"strconv"
	"strings"
)

// Error classes. Every error returned by Unmarshal, and every error Decode
// records, is a *DecodeError that matches exactly one of these with errors.Is (ErrNotR4 may match in addition
// to ErrUnknownProperty or ErrInvalidValue when the shape is a known DSTU2 or
// STU3 one).
var (
	// ErrSyntax: the input is not well-formed JSON.
	ErrSyntax = errors.New("r4: malformed JSON")
	// ErrUnknownProperty: an object member that R4 does not define at that
	// place. The decoder never drops members it does not know.
	ErrUnknownProperty = errors.New("r4: unknown property")
	// ErrInvalidValue: a member has the wrong JSON type for its element, a
	// number that is not a valid integer, a string that is not valid UTF-8,
	// primitive arrays whose value and "_" companions differ in length, an
	// empty object or array, or null where no null is allowed.
	ErrInvalidValue = errors.New("r4: invalid value")
	// ErrDuplicateProperty: the same member appears twice in one object.
	ErrDuplicateProperty = errors.New("r4: duplicate property")
	// ErrMissingResourceType: a resource object without "resourceType".
	ErrMissingResourceType = errors.New("r4: missing resourceType")
	// ErrNotR4: the content is not FHIR R4: an unknown resourceType (for
	// example a DSTU2 or STU3 one such as MedicationOrder or ProcedureRequest),
	// or a shape that earlier versions used and R4 does not.
	ErrNotR4 = errors.New("r4: not FHIR R4 content")
	// ErrLimit: the input exceeds a size or nesting-depth limit.
	ErrLimit = errors.New("r4: limit exceeded")
)

// DecodeError describes why decoding failed and where.
type DecodeError struct {
	// Path is the FHIRPath-style location of the offending element, for
	// example "Patient.name[0].given[1]" or "Bundle.entry[2].resource.foo".
	// It uses JSON member names, so a choice element appears as
	// "valueQuantity" and a primitive's "_given" companion as "given".
	// It is empty when the error is not inside an element (malformed JSON
	// before the first member).
	Path string
	// Offset is the byte offset in the input where the problem was found.
	Offset int
	// Reason says what is wrong, in words.
	Reason string
	// Err is the error class: one of the Err* sentinels of this package.
	Err error
	// NotR4 is set when the problem identifies DSTU2 or STU3 content.
	NotR4 bool

	segs []string // path segments, innermost first, while unwinding
}

// Error implements error.
func (e *DecodeError) Error() string {
	var b strings.Builder
	b.WriteString("fhir r4: ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	b.WriteString(" (offset ")
	b.WriteString(strconv.Itoa(e.Offset))
	b.WriteString(")")
	return b.String()
}

// Unwrap returns the error classes e belongs to.
func (e *DecodeError) Unwrap() []error {
	if e.NotR4 && e.Err != ErrNotR4 {
		return []error{e.Err, ErrNotR4}
	}
	return []error{e.Err}
}

// memberError adds the member name k to the path of a decode error while it
// unwinds. A "_x" companion is reported at x.
func memberError(err error, k string) error {
	if len(k) > 1 && k[0] == '_' {
		k = k[1:]
	}
	switch e := err.(type) {
	case *DecodeError:
		e.segs = append(e.segs, "."+k)
	case *recorded:
		e.addSeg("." + k)
	}
	return err
}

// indexError adds an array index to the path of a decode error.
func indexError(err error, i int) error {
	switch e := err.(type) {
	case *DecodeError:
		e.segs = append(e.segs, "["+strconv.Itoa(i)+"]")
	case *recorded:
		e.addSeg("[" + strconv.Itoa(i) + "]")
	}
	return err
}

// resourceError records the resource type whose decoding failed: the path
// restarts there when the resource is the root.
func resourceError(err error, resourceType string) error {
	switch e := err.(type) {
	case *DecodeError:
		e.segs = append(e.segs, "\x00"+resourceType)
	case *recorded:
		e.addSeg("\x00" + resourceType)
	}
	return err
}

// finish renders the path once the error has reached the top, and marks
// errors at places where DSTU2 or STU3 content differs from R4.
func (e *DecodeError) finish() {
	if e.segs == nil {
		return
	}
	// The element path inside the innermost resource, without indices.
	var rel []string
	for _, s := range e.segs {
		if s[0] == 0 {
			rel = append(rel, s[1:])
			break
		}
		if s[0] == '.' {
			rel = append(rel, s)
		}
	}
	if len(rel) > 1 && rel[len(rel)-1] != "" {
		var b strings.Builder
		for i := len(rel) - 1; i >= 0; i-- {
			b.WriteString(rel[i])
		}
		if hint, ok := earlierVersionShape(b.String()); ok && (e.Err == ErrUnknownProperty || e.Err == ErrInvalidValue) {
			e.NotR4 = true
			e.Reason += " (" + hint + "; this looks like DSTU2 or STU3 content, not R4)"
		}
	}
	var b strings.Builder
	top := ""
	for i := len(e.segs) - 1; i >= 0; i-- {
		s := e.segs[i]
		if s[0] == 0 {
			if b.Len() == 0 && top == "" {
				top = s[1:]
				b.WriteString(top)
			}
			continue
		}
		b.WriteString(s)
	}
	e.Path = strings.TrimPrefix(b.String(), ".")
	e.segs = nil
}

// recorded is what a decoding step returns, in collect mode (Options.Decode)
// only, when it recorded errors in d.errs instead of returning them: errors
// d.errs[from:] were met while decoding its value and still lack the path
// segments of the enclosing levels, which memberError, indexError and
// resourceError add as the marker unwinds. This keeps paths lazy: nothing is
// tracked for members that decode cleanly.
type recorded struct {
	d    *decoder
	from int
	// abandoned: the value was not consumed; the caller must skip it from
	// its start and leave the element unset.
	abandoned bool
	// fatal: decoding stops; the fatal error is the last in d.errs.
	fatal bool
}

func (r *recorded) Error() string { return "fhir r4: errors recorded" }

// addSeg adds a path segment to every error the marker covers.
func (r *recorded) addSeg(seg string) {
	for _, e := range r.d.errs[r.from:] {
		e.segs = append(e.segs, seg)
	}
}

// fatalClass reports whether an error of this class ends decoding.
func fatalClass(class error) bool { return class == ErrSyntax || class == ErrLimit }
