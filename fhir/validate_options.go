package fhir

import (
	"fmt"

	"github.com/acds-project/acds/fhir/r4"
)

// ValidateOptions are run settings of the validation, each mirroring a run
// setting of the HL7 Java validator that changes what it reports. The zero
// value is the defaults, which are Validate's (and those Check and Process
// validate with).
type ValidateOptions struct {
	// SecurityChecks makes text that looks like embedded HTML tags in a
	// string an error instead of a warning, as the HL7 validator's
	// security checks (-security-checks; off by default) do. Narrative
	// (xhtml) is checked as XHTML whatever this says.
	SecurityChecks bool

	// Contained says what becomes of contained resources: ContainedCheck
	// (the zero value) validates them fully, ContainedIgnore does not look
	// inside them, as the HL7 validator's validateContains IGNORE.
	Contained ContainedMode
}

// ContainedMode is how ValidateWith treats the contained resources
// (DomainResource.contained). Its text forms, for flags and
// configuration, are "check" and "ignore".
type ContainedMode uint8

const (
	// ContainedCheck validates contained resources like any other: their
	// elements, ids and constraints, and the rules on containment
	// (dom-2..dom-5). It is the default.
	ContainedCheck ContainedMode = iota
	// ContainedIgnore does not validate the contents of contained
	// resources, as the HL7 validator with validateContains IGNORE: no
	// finding is made about their elements, their ids or their meta
	// (dom-2, dom-4, dom-5), and dom-3 (every contained resource is
	// referenced from elsewhere in its container) is not checked, since
	// the references that could meet it may be in the contained
	// resources themselves. Their ids are still read, so that a
	// container's local references ("#id") to them resolve (ref-1).
	// Findings of the JSON decoding inside them (malformed JSON, unknown
	// properties, wrong JSON types) are still reported: the input must be
	// read to be skipped, and the HL7 validator's parser reports those
	// too.
	ContainedIgnore
)

// String returns the mode's text form: "check" or "ignore".
func (m ContainedMode) String() string {
	switch m {
	case ContainedCheck:
		return "check"
	case ContainedIgnore:
		return "ignore"
	}
	return fmt.Sprintf("ContainedMode(%d)", uint8(m))
}

// MarshalText returns the mode's text form: "check" or "ignore".
func (m ContainedMode) MarshalText() ([]byte, error) {
	switch m {
	case ContainedCheck, ContainedIgnore:
		return []byte(m.String()), nil
	}
	return nil, fmt.Errorf("fhir: unknown contained mode %d", uint8(m))
}

// UnmarshalText sets the mode from its text form, "check" or "ignore";
// anything else is an error that says so.
func (m *ContainedMode) UnmarshalText(text []byte) error {
	switch string(text) {
	case "check":
		*m = ContainedCheck
	case "ignore":
		*m = ContainedIgnore
	default:
		return fmt.Errorf("contained mode %q: want check or ignore", text)
	}
	return nil
}

// ValidateWith is Validate with run settings: ValidateWith(data,
// ValidateOptions{}) is Validate(data).
func ValidateWith(data []byte, opts ValidateOptions) *OperationOutcome {
	out, _, _ := decodeAndValidateWith(data, DefaultMaxBytes, opts, false)
	return out
}

// The options are decided here, each in one place.

// ignoredContained reports whether the node on top of stack is a
// contained resource whose contents the options leave unvalidated. The
// walk's enter registers its id with its container and skips it; leave
// skips it too.
func (v *validator) ignoredContained(stack []specFrame) bool {
	if v.opts.Contained != ContainedIgnore || len(stack) < 2 {
		return false
	}
	f := &stack[len(stack)-1]
	_, isRes := f.Node.(r4.Resource)
	return isRes && f.Name == "contained"
}

// checksDom3 reports whether dom-3 is checked: not when contained
// resources are ignored, since references from them (to "#", the
// container, or to another contained resource) meet it.
func (v *validator) checksDom3() bool {
	return v.opts.Contained != ContainedIgnore
}

// htmlInString reports a string value, at where, whose text looks like
// embedded HTML tags: an error with SecurityChecks, otherwise a warning
// (the HL7 validator's security checks are off by default, when it is a
// hint).
func (v *validator) htmlInString(where string) {
	if v.opts.SecurityChecks {
		v.errorf("security", where, "the string value contains text that looks like embedded HTML tags, which are not allowed for security reasons in this context")
		return
	}
	v.add(SeverityWarning, "security", where, "the string value contains text that looks like embedded HTML tags")
}
