package fhir

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acds-project/acds/fhir/fhirpath"
	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// DefaultMaxBytes is the input size limit when an Options or Validate
// caller sets none: 32 MiB, the server's /v1/process body limit.
const DefaultMaxBytes = 32 << 20

// Caps on the issues one validation records, so hostile input cannot make
// the outcome larger than the input by much. Errors past the cap still
// fail validation (a fatal issue says so); warnings past theirs are only
// counted.
const (
	maxErrors   = 1000
	maxWarnings = MaxWarnings
)

// MaxWarnings is how many warnings one validation reports; past it a
// single information issue says that the rest are not reported.
const MaxWarnings = 200

// Validate checks data as FHIR R4 JSON (one resource, typically a Bundle)
// and reports every finding. It never fails: malformed JSON, oversized
// input and non-R4 content are reported as fatal or error issues.
//
// Validate decodes data into the typed R4 model of package fhir/r4, whose
// strict decoder reports malformed JSON, unknown properties, wrong JSON
// types, duplicate properties and content of other FHIR versions, and
// then checks the model: primitive formats; cardinality; choice elements;
// reference formats and target types; codes of required bindings (and of
// extensible ones, as warnings); resource ids (a contained one too);
// Bundle rules (fullUrl, bdl-1..bdl-12, resolvable urn:uuid references,
// one link per relation); XHTML narrative (XML entities only); the
// contexts of the core R4 extensions (outside conformance resources); and
// every constraint of the R4 resources and data types (see
// constraints.go): ele-1, dom-2..dom-6 and a few others in Go, all the
// others evaluated as FHIRPath, each failure naming its key and location.
// Best-practice constraints (dom-6 and those so marked) and warning-level
// ones are warnings. A constraint that cannot be evaluated is a warning
// naming it, never an error. Their evaluation is bounded per element and
// per validation (a FHIRPath step budget growing with the input's size);
// should crafted input spend it, one warning says which constraints were
// not checked. HTML in a string is a warning (the HL7
// validator's security checks are off by default; see ValidateWith for
// the run settings that change this and the checking of contained
// resources). It does not check
// profiles, extensions outside the core definitions, or terminology
// outside the core required value sets.
//
// The order of the findings is deterministic: decoding findings come
// first, in input order; the findings on the model follow in the order of
// the R4 definitions (the order r4.Walk visits), which is the input order
// for FHIR JSON written in the conventional member order.
func Validate(data []byte) *OperationOutcome {
	out, _, _ := decodeAndValidate(data, DefaultMaxBytes)
	return out
}

// decodeAndValidate decodes data with r4.Options{MaxBytes: maxBytes}.Decode
// and validates the typed model. It returns every finding, the decoded
// resource (nil when decoding could not complete or the root is not a
// resource) and whether the content is FHIR of another version.
func decodeAndValidate(data []byte, maxBytes int) (*OperationOutcome, r4.Resource, bool) {
	return decodeAndValidateWith(data, maxBytes, ValidateOptions{}, false)
}

// decodeAndCheck is decodeAndValidate looking for errors only: warnings
// are counted but not written, and the constraints that can only warn
// (best practice, warning severity) are not evaluated, nor those that
// fhirpath.Expression.TrueWithout shows met by an element from the
// children it lacks (obs-7 on an Observation without components). A
// caller that needs only the verdict (Check) uses it, and validates again
// in full for the outcome when it finds errors.
//
// Every error full validation finds, this finds too, so the verdict of
// such a caller is full validation's: the two check the same rules in the
// same order, except the evaluations this leaves out, which cannot fail
// a rule; those only leave more of the constraints' step budget to the
// evaluations after them, which therefore end as in full validation or,
// where full validation ran out of budget, complete.
func decodeAndCheck(data []byte, maxBytes int) (*OperationOutcome, r4.Resource, bool) {
	return decodeAndValidateWith(data, maxBytes, ValidateOptions{}, true)
}

// decodeAndValidateWith is decodeAndValidate with run settings, and with
// errorsOnly as decodeAndCheck.
func decodeAndValidateWith(data []byte, maxBytes int, opts ValidateOptions, errorsOnly bool) (*OperationOutcome, r4.Resource, bool) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	v := &validator{size: len(data), opts: opts, errorsOnly: errorsOnly}
	if len(data) > maxBytes {
		v.add(SeverityFatal, "too-costly", "", "input is %d bytes, above the limit of %d", len(data), maxBytes)
		return &OperationOutcome{Issues: v.issues}, nil, false
	}
	// A check for errors only drops the model and its outcome (Check keeps
	// neither), so its strings may borrow the input's bytes.
	r, errs := r4.Options{MaxBytes: maxBytes, Borrow: errorsOnly}.Decode(data)
	for i, de := range errs {
		v.decodeError(de, r == nil && i == len(errs)-1)
		v.markDamaged(de.Path)
	}
	if r == nil && len(errs) == 0 {
		v.add(SeverityFatal, "structure", "", "the content is not a FHIR resource")
	}
	if r != nil {
		v.validate(r)
	}
	return &OperationOutcome{Issues: v.issues}, r, v.notR4
}

// text returns a primitive's value in its lexical form, "" when p is nil
// or has no value.
func text[P interface {
	*T
	r4.Primitive
}, T any](p P) string {
	if p == nil {
		return ""
	}
	return p.Text()
}

// validator validates one decoded resource tree.
type validator struct {
	issues   []Issue
	errors   int // errors and fatal issues found, reported or not
	warnings int // warnings and information found, reported or not
	notR4    bool
	opts     ValidateOptions // the run settings (validate_options.go)
	// errorsOnly: the caller needs the errors only (see decodeAndCheck).
	errorsOnly bool

	valueSets map[*spec.Element]*spec.ValueSet // bound value sets looked up so far
	// damaged holds the paths of the elements the decoder reported a
	// problem in or under. Their skipped parts are missing from the model,
	// so they are not judged on what is missing (required elements,
	// ele-1, ext-1, pat-1…): the decoder's finding already says why.
	damaged map[string]bool

	rules       *ruleSet  // the compiled R4 constraints
	now         time.Time // now() in constraints, read once per validation
	size        int       // input bytes, for the constraints' step budget
	budget      *int      // FHIRPath steps left for the constraints
	budgetSpent bool      // the budget ran out (reported once)

	frames  []vframe   // per depth of the walk
	res     []*tresCtx // the resources on the current path, innermost last
	spare   []*tresCtx // left resources' contexts, for reuse (one allocation per depth, not per resource)
	bundles []*bundleCtx
}

// vframe is the validator's own state for one node on the walk's path.
type vframe struct {
	choices  []string // paths of the choice elements among the children seen
	required []string // paths of the required elements among the children seen
	damaged  bool     // the decoder reported a problem in or under the node
}

// damagedMember reports whether the decoder reported a problem in the
// member of the element at where that holds the element rp of t (name is
// rp's last step; a choice "value[x]" is any of its members).
func (v *validator) damagedMember(where string, t *spec.Type, rp, name string) bool {
	if !strings.HasSuffix(name, "[x]") {
		return v.damaged[where+"."+name]
	}
	for i := range t.Elements {
		if e := &t.Elements[i]; e.Path == rp && v.damaged[where+"."+e.Name] {
			return true
		}
	}
	return false
}

// markDamaged records path and every element containing it as damaged.
func (v *validator) markDamaged(path string) {
	if path == "" {
		return
	}
	if v.damaged == nil {
		v.damaged = map[string]bool{}
	}
	for {
		if v.damaged[path] {
			return // and so are its ancestors
		}
		v.damaged[path] = true
		// The parent of "a.b[2]" is the member "a.b", then "a".
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return
		}
		path = path[:i]
	}
}

// tresCtx is per-resource state for the reference and contained checks.
type tresCtx struct {
	r      r4.Resource
	env    *fhirpath.Env // the constraints' environment, made on first use (envVal)
	envVal fhirpath.Env
	// index is the Bundle context whose index resolve() uses, found
	// with env.
	index       *bundleCtx
	typ         string
	id          string
	version     string // meta.versionId
	isContained bool
	containedID []string        // ids of the contained resources, in order
	contained   map[string]bool // ids of contained resources
	localRefs   map[string]bool // "#id" references seen ("" for "#")
	// containedRefsUs: ids of contained resources that refer to "#".
	containedRefsUs map[string]bool

	bundle *bundleCtx // the Bundle whose entry this resource is
	entry  int        // its entry index
	params *paramsCtx // the Parameters whose parameter this resource is

	ownBundle *bundleCtx // set when the resource is a Bundle
	ownParams *paramsCtx // set when the resource is a Parameters
}

// bundleCtx is what a Bundle's rules need from its entries. Its maps and
// slices are reused from one Bundle to the next (newBundleCtx,
// releaseBundleCtx), so that a validation does not allocate them anew.
type bundleCtx struct {
	// fullURLTypes maps every entry fullUrl to the type of its resource,
	// "" when no entry under it has one (see entryTypes).
	fullURLTypes map[string]string
	refs         []entryRef            // references in entry resources, in walk order
	versions     map[int]string        // entry index to its resource's meta.versionId
	index        *fhirpath.BundleIndex // for resolve() in constraints, made on first use

	// bundleRules' own tables, empty between its calls.
	seenFull map[fullURLVersion]int // each fullUrl and version to its first entry
	byTypeID map[typeID]matches     // each type and id to its entries
}

// bundleCtxs holds released bundleCtx values with their storage.
var bundleCtxs sync.Pool

// newBundleCtx returns an empty bundleCtx for b, its fullURLTypes made: a
// released one when there is one, else one whose storage is sized for
// b's entries.
func newBundleCtx(b *r4.Bundle) *bundleCtx {
	n := len(b.Entry)
	bc, _ := bundleCtxs.Get().(*bundleCtx)
	if bc == nil {
		bc = &bundleCtx{fullURLTypes: make(map[string]string, n), seenFull: make(map[fullURLVersion]int, n), byTypeID: make(map[typeID]matches, n)}
	}
	if cap(bc.refs) < 4*n {
		bc.refs = make([]entryRef, 0, 4*n)
	}
	entryTypes(bc.fullURLTypes, b)
	return bc
}

// maxPooledEntries: the storage of a Bundle with more entries than this is
// left to the garbage collector rather than kept for reuse, so that one
// large Bundle does not leave every later validation clearing large maps.
const maxPooledEntries = 1024

// releaseBundleCtx empties bc, which its Bundle no longer needs, for
// reuse. Emptying also drops its strings, which may borrow the input.
func releaseBundleCtx(bc *bundleCtx, entries int) {
	if entries > maxPooledEntries || cap(bc.refs) > 4*maxPooledEntries {
		return
	}
	clear(bc.fullURLTypes)
	clear(bc.versions)
	clear(bc.seenFull)
	clear(bc.byTypeID)
	clear(bc.refs)
	bc.refs = bc.refs[:0]
	bc.index = nil
	bundleCtxs.Put(bc)
}

type entryRef struct {
	entry int
	ref   string
}

// paramsCtx is what the Parameters rule needs from its resources.
type paramsCtx struct {
	ids  map[string]bool // Type/id of every parameter resource
	refs []string        // references in parameter resources other than Bundles
}

func (v *validator) add(sev Severity, code, where, format string, args ...any) {
	if sev == SeverityError || sev == SeverityFatal {
		v.errors++
		if v.errors > maxErrors {
			if v.errors == maxErrors+1 {
				v.issues = append(v.issues, Issue{Severity: SeverityFatal, Code: "too-costly",
					Diagnostics: fmt.Sprintf("more than %d errors; validation stopped reporting them", maxErrors)})
			}
			return
		}
	} else {
		v.warnings++
		if v.errorsOnly {
			return
		}
		if v.warnings > maxWarnings {
			if v.warnings == maxWarnings+1 {
				v.issues = append(v.issues, Issue{Severity: SeverityInformation, Code: "informational",
					Diagnostics: fmt.Sprintf("more than %d warnings; the rest are not reported", maxWarnings)})
			}
			return
		}
	}
	is := Issue{Severity: sev, Code: code, Diagnostics: fmt.Sprintf(format, args...)}
	if where != "" {
		is.Expression = []string{where}
	}
	v.issues = append(v.issues, is)
}

func (v *validator) errorf(code, where, format string, args ...any) {
	v.add(SeverityError, code, where, format, args...)
}

// jsonWords names JSON types in diagnostics the way the HL7 validator
// words them ("a JSON Array").
var jsonWords = strings.NewReplacer("an array", "a JSON Array", "an object", "a JSON object",
	"a string", "a JSON string", "a number", "a JSON number", "a boolean", "a JSON boolean")

// decodeError turns one decoder finding into an issue. last is set for
// the fatal error that ended decoding without a resource.
func (v *validator) decodeError(de *r4.DecodeError, last bool) {
	where, reason := de.Path, de.Reason
	switch {
	case errors.Is(de, r4.ErrSyntax):
		v.add(SeverityFatal, "structure", where, "error parsing JSON: %s (at byte %d)", reason, de.Offset)
	case errors.Is(de, r4.ErrLimit):
		v.add(SeverityFatal, "too-costly", where, "%s", reason)
	case errors.Is(de, r4.ErrMissingResourceType):
		if where == "" {
			v.add(SeverityFatal, "structure", "", "the JSON object has no resourceType, so it is not a FHIR resource")
		} else {
			v.errorf("structure", where, "the resource has no resourceType")
		}
	case de.NotR4 || errors.Is(de, r4.ErrNotR4):
		if rt, ok := quotedAfter(reason, "resourceType "); ok && errors.Is(de, r4.ErrNotR4) {
			if why := preR4Resource(rt); why != "" {
				v.notR4 = true
				v.add(sevFor(last, where), "not-supported", where, "resource type %s is %s, not FHIR R4", rt, why)
			} else {
				v.add(sevFor(last, where), "structure", where, "unknown resource type %q", rt)
			}
			return
		}
		v.notR4 = true
		if reason = strings.Replace(reason, "content, not R4", "content, not FHIR R4", 1); !strings.Contains(reason, "not FHIR R4") {
			reason += " (not FHIR R4)"
		}
		v.add(sevFor(last, where), "not-supported", where, "%s", reason)
	case errors.Is(de, r4.ErrUnknownProperty):
		v.errorf("structure", where, "%s", strings.Replace(reason, "unknown property", "unrecognized property", 1))
	case errors.Is(de, r4.ErrDuplicateProperty):
		v.errorf("structure", where, "duplicate JSON property %q", lastName(where))
	case reason == "empty object":
		v.errorf("invariant", where, "ele-1: an element must have a value or children (empty object)")
	case reason == "empty array":
		v.errorf("structure", where, "array cannot be empty: the property should not be present if it has no values")
	case last && where == "":
		v.add(SeverityFatal, "structure", "", "the content is not a FHIR resource (a JSON object): %s", jsonWords.Replace(reason))
	case strings.HasPrefix(reason, "expected ") && strings.Contains(reason, ", found "):
		want, found, _ := strings.Cut(reason[len("expected "):], ", found ")
		v.errorf("structure", where, "the property must be %s, not %s", jsonWords.Replace(want), found)
	default:
		v.errorf("structure", where, "%s", reason)
	}
}

// sevFor is fatal for the root resource, which could not be decoded at all.
func sevFor(last bool, where string) Severity {
	if last && where == "" {
		return SeverityFatal
	}
	return SeverityError
}

// quotedAfter returns the Go-quoted string that follows prefix in s.
func quotedAfter(s, prefix string) (string, bool) {
	i := strings.Index(s, prefix+`"`)
	if i < 0 {
		return "", false
	}
	q, err := strconv.QuotedPrefix(s[i+len(prefix):])
	if err != nil {
		return "", false
	}
	u, err := strconv.Unquote(q)
	return u, err == nil
}

// lastName returns the member name of the last step of a path.
func lastName(path string) string {
	if i := strings.IndexByte(path, '['); i >= 0 && strings.LastIndexByte(path, '.') < i {
		path = path[:i]
	}
	return path[strings.LastIndexByte(path, '.')+1:]
}

// pathOf renders the location of stack's top node, as r4.Path does.
func pathOf(stack []specFrame) string {
	var b strings.Builder
	if r, ok := stack[0].Node.(r4.Resource); ok {
		b.WriteString(r.ResourceType())
	}
	for _, f := range stack[1:] {
		b.WriteByte('.')
		b.WriteString(f.Name)
		if f.Index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.Index))
			b.WriteByte(']')
		}
	}
	return b.String()
}

func (v *validator) validate(r r4.Resource) {
	_ = specWalk(r, v.enter, v.leave)
}

func (v *validator) enter(path *r4.Path, stack []specFrame) error {
	depth := len(stack) - 1
	f := &stack[depth]
	if depth < len(v.frames) {
		vf := &v.frames[depth]
		vf.choices, vf.required, vf.damaged = vf.choices[:0], vf.required[:0], false
	} else {
		v.frames = append(v.frames, vframe{})
	}
	// Only the children of a damaged element can be damaged.
	damaged := v.damaged != nil && (depth == 0 || v.frames[depth-1].damaged) && v.damaged[path.String()]
	v.frames[depth].damaged = damaged
	if e := f.Elem; e != nil && depth > 0 {
		pf := &v.frames[depth-1]
		if e.Min > 0 && f.Index <= 0 {
			pf.required = append(pf.required, e.Path)
		}
		if f.Index <= 0 && f.Choice {
			for _, p := range pf.choices {
				if p == e.Path {
					v.errorf("structure", path.String(), "only one of the choices of %s may be present", e.Path)
				}
			}
			pf.choices = append(pf.choices, e.Path)
		}
		if e.Max > 1 && f.Index == e.Max {
			v.errorf("structure", pathOf(stack[:depth])+"."+f.Name, "maximum allowed = %d, but found more", e.Max)
		}
	}
	if damaged {
		switch f.Node.(type) {
		case *r4.Attachment, *r4.Quantity, *r4.Age, *r4.Duration, *r4.Distance, *r4.Count, *r4.ContactPoint, *r4.PatientContact:
			return nil // their invariants are about parts that may be missing
		}
	}
	isRes, isPrim := f.kinds()
	// An element id is a plain string the walk does not visit on its own
	// (a resource's logical id is enterResource's).
	if f.ID != "" && !isRes {
		v.elementID(path, f.ID)
	}
	if isRes {
		if n, ok := f.Node.(r4.Resource); ok {
			v.enterResource(path, stack, n)
			if v.ignoredContained(stack) {
				return r4.SkipChildren
			}
		}
	} else if isPrim {
		if n, ok := f.Node.(r4.Primitive); ok {
			v.primitive(path, f, n)
		}
	}
	switch n := f.Node.(type) {
	case *r4.Reference:
		v.reference(path, f, n)
	case *r4.Coding:
		if s := text(n.System); s != "" && !strings.Contains(s, ":") {
			v.errorf("value", path.String()+".system", "Coding.system must be an absolute reference, not a local reference")
		}
		if e := f.Elem; e != nil && (e.Strength == spec.Required || e.Strength == spec.Extensible) && e.ValueSet != "" {
			if vs := v.valueSet(e); vs != nil && text(n.Code) != "" && !vs.Contains(text(n.System), text(n.Code)) {
				v.binding(e, path.String(), "the coding %s#%s is not in the value set %s", text(n.System), text(n.Code), e.ValueSet)
			}
		}
	case *r4.CodeableConcept:
		if e := f.Elem; e != nil && (e.Strength == spec.Required || e.Strength == spec.Extensible) && e.ValueSet != "" && len(n.Coding) > 0 {
			if vs := v.valueSet(e); vs != nil && !anyCodingIn(vs, n.Coding) {
				v.binding(e, path.String(), "none of the codings provided are in the value set %s", e.ValueSet)
			}
		}
	case *r4.Extension:
		// url is a plain string, which the walk does not visit.
		if u := n.URL; u != "" {
			if c := u[0]; (c <= ' ' || c >= 0x80) && strings.TrimSpace(u) == "" {
				v.errorf("value", path.String()+".url", "the value must not be only whitespace")
			} else if msg := primitiveFormat("uri", u); msg != "" {
				v.errorf("value", path.String()+".url", "%s: %q", msg, clip(u))
			} else if depth > 0 {
				v.extensionContext(path, stack, u)
			}
		}
	case *r4.Attachment:
		v.attachment(path, n)
	case *r4.Quantity:
		v.qty3(path, n.Code != nil, n.System != nil)
	case *r4.Age:
		v.qty3(path, n.Code != nil, n.System != nil)
	case *r4.Duration:
		v.qty3(path, n.Code != nil, n.System != nil)
	case *r4.Distance:
		v.qty3(path, n.Code != nil, n.System != nil)
	case *r4.Count:
		v.qty3(path, n.Code != nil, n.System != nil)
	case *r4.ContactPoint:
		if n.Value != nil && n.System == nil {
			v.errorf("invariant", path.String(), "cpt-2: a system is required if a value is provided")
		}
	case *r4.Period:
		if start, end := text(n.Start), text(n.End); start != "" && end != "" && laterThan(start, end) {
			v.errorf("invariant", path.String(), "per-1: if present, start shall have a lower value than end")
		}
	case *r4.PatientContact:
		if n.Name == nil && len(n.Telecom) == 0 && n.Address == nil && n.Organization == nil {
			v.errorf("invariant", path.String(), "pat-1: a contact shall at least contain a contact's details or a reference to an organization")
		}
	case *r4.Meta:
		if _, ok := stack[depth-1].Node.(r4.Resource); ok && len(v.res) > 0 {
			rc := v.res[len(v.res)-1]
			rc.version = text(n.VersionID)
			if rc.isContained {
				if n.VersionID != nil || n.LastUpdated != nil {
					v.errorf("invariant", pathOf(stack[:depth]), "dom-4: a contained resource must not have meta.versionId or meta.lastUpdated")
				}
				if len(n.Security) > 0 {
					v.errorf("invariant", pathOf(stack[:depth]), "dom-5: a contained resource must not have a security label")
				}
			}
		}
	}
	if !damaged && checkConstraints {
		v.constraints(stack)
	}
	return nil
}

// elementID checks an element's id as the string it is.
func (v *validator) elementID(path *r4.Path, id string) {
	if c := id[0]; (c <= ' ' || c >= 0x80) && strings.TrimSpace(id) == "" {
		v.errorf("value", path.String()+".id", "the value must not be only whitespace")
	} else if msg := primitiveFormat("string", id); msg != "" {
		v.errorf("value", path.String()+".id", "%s: %q", msg, clip(id))
	}
}

func (v *validator) qty3(path *r4.Path, code, system bool) {
	if code && !system {
		v.errorf("invariant", path.String(), "qty-3: if a code for the unit is present, the system shall also be present")
	}
}

// valueSet returns the expansion of e's bound value set (nil when the
// tables have none), looking each element's up once per validation.
func (v *validator) valueSet(e *spec.Element) *spec.ValueSet {
	vs, ok := v.valueSets[e]
	if !ok {
		if v.valueSets == nil {
			v.valueSets = map[*spec.Element]*spec.ValueSet{}
		}
		vs = spec.LookupValueSet(e.ValueSet)
		v.valueSets[e] = vs
	}
	return vs
}

func anyCodingIn(vs *spec.ValueSet, cs []r4.Coding) bool {
	for i := range cs {
		if vs.Contains(text(cs[i].System), text(cs[i].Code)) {
			return true
		}
	}
	return false
}

// binding reports a code outside a bound value set: an error for a
// required binding, a warning for an extensible one (as the HL7 validator).
func (v *validator) binding(e *spec.Element, where, format string, args ...any) {
	if e.Strength == spec.Required {
		v.errorf("code-invalid", where, format+", which is required", args...)
		return
	}
	v.add(SeverityWarning, "code-invalid", where, format+", which is extensible", args...)
}

func (v *validator) enterResource(path *r4.Path, stack []specFrame, r r4.Resource) {
	depth := len(stack) - 1
	f := &stack[depth]
	var rc *tresCtx
	if n := len(v.spare); n > 0 {
		rc, v.spare = v.spare[n-1], v.spare[:n-1]
	} else {
		rc = new(tresCtx)
	}
	*rc = tresCtx{r: r, typ: r.ResourceType(), id: r.ResourceID(), isContained: depth > 0 && f.Name == "contained"}
	var parent *tresCtx
	if len(v.res) > 0 {
		parent = v.res[len(v.res)-1]
	}
	if parent != nil && f.Elem != nil {
		switch {
		case rc.isContained:
			parent.containedID = append(parent.containedID, rc.id)
			if rc.id != "" {
				if parent.contained == nil {
					parent.contained = map[string]bool{}
				}
				parent.contained[rc.id] = true
			}
		case f.Elem.Path == "Bundle.entry.resource" && parent.ownBundle != nil:
			rc.bundle, rc.entry = parent.ownBundle, stack[depth-1].Index
		case f.Elem.Path == "Parameters.parameter.resource" && parent.ownParams != nil:
			rc.params = parent.ownParams
			if rc.id != "" {
				rc.params.ids[rc.typ+"/"+rc.id] = true
			}
		}
	}
	if v.ignoredContained(stack) {
		return // registered with its container above, and not validated
	}
	if rc.id != "" {
		v.resourceID(path, rc.id, rc.isContained)
	}
	switch n := r.(type) {
	case *r4.Bundle:
		rc.ownBundle = newBundleCtx(n)
		v.bundles = append(v.bundles, rc.ownBundle)
	case *r4.Parameters:
		rc.ownParams = &paramsCtx{ids: map[string]bool{}}
	}
	v.res = append(v.res, rc)
}

func (v *validator) resourceID(path *r4.Path, id string, contained bool) {
	if len(id) > 64 {
		v.errorf("value", path.String()+".id", "invalid resource id: too long (%d chars)", len(id))
		return
	}
	for i := 0; i < len(id); i++ {
		if !isIDChar(id[i]) {
			v.errorf("value", path.String()+".id", "invalid resource id: invalid characters (%q)", id)
			return
		}
	}
}

// entryTypes maps the fullUrls of a Bundle's entries into m: each to the
// type of the last resource under it, "" when no entry under it has one.
func entryTypes(m map[string]string, b *r4.Bundle) {
	for i := range b.Entry {
		e := &b.Entry[i]
		fu := text(e.FullURL)
		switch {
		case fu == "":
		case e.Resource != nil:
			m[fu] = e.Resource.ResourceType()
		default:
			if _, ok := m[fu]; !ok {
				m[fu] = ""
			}
		}
	}
}

// primitive validates a primitive value's lexical form, and a code against
// its element's required or extensible binding.
func (v *validator) primitive(path *r4.Path, f *specFrame, p r4.Primitive) {
	if !p.HasValue() {
		return // an extension-only primitive ("_birthDate")
	}
	typ, s := p.PrimitiveType(), p.Text()
	switch typ {
	case "boolean":
		return
	case "integer", "positiveInt", "unsignedInt":
		i, err := strconv.ParseInt(s, 10, 32)
		switch {
		case err != nil:
			v.errorf("value", path.String(), "the value %q is not a valid integer", s)
		case typ == "positiveInt" && i < 1:
			v.errorf("value", path.String(), "the value %d must be a positive integer (>= 1)", i)
		case typ == "unsignedInt" && i < 0:
			v.errorf("value", path.String(), "the value %d must not be negative", i)
		}
		return
	case "decimal":
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			v.errorf("value", path.String(), "the value %q is not a valid decimal", s)
		}
		return
	}
	if s == "" {
		v.errorf("value", path.String(), "@value cannot be empty")
		return
	}
	if c := s[0]; (c <= ' ' || c >= 0x80) && strings.TrimSpace(s) == "" {
		v.errorf("value", path.String(), "the value must not be only whitespace")
		return
	}
	if msg := primitiveFormat(typ, s); msg != "" {
		v.errorf("value", path.String(), "%s: %q", msg, clip(s))
		return
	}
	switch typ {
	case "string":
		if looksLikeHTML(s) {
			v.htmlInString(path.String())
		}
	case "canonical", "uri", "url":
		if s[0] == '#' {
			v.localRef(s[1:]) // dom-3 counts "#id" canonicals and uris as references
		}
	}
	if e := f.Elem; typ == "code" && e != nil && (e.Strength == spec.Required || e.Strength == spec.Extensible) {
		if vs := v.valueSet(e); vs != nil && !vs.Contains("", s) {
			v.binding(e, path.String(), "the value provided (%q) is not in the value set %s", s, e.ValueSet)
		}
	}
}

// reference checks a Reference's reference string: its format, its target
// type against the element's allowed targets, and local (#id) resolution;
// and records it for the Bundle and Parameters rules.
func (v *validator) reference(path *r4.Path, f *specFrame, n *r4.Reference) {
	ref := text(n.Reference)
	if ref == "" || len(v.res) == 0 {
		return
	}
	rc := v.res[len(v.res)-1]
	if rc.bundle != nil {
		rc.bundle.refs = append(rc.bundle.refs, entryRef{rc.entry, ref})
	}
	if rc.params != nil && rc.typ != "Bundle" {
		rc.params.refs = append(rc.params.refs, ref)
	}
	if strings.HasPrefix(ref, "#") {
		v.localRef(ref[1:])
		if ref != "#" && !rc.contained[ref[1:]] && !rc.isContained {
			v.errorf("not-found", path.String()+".reference", "unable to resolve resource with reference %q (ref-1: a local reference needs a contained resource)", ref)
		}
		return
	}
	typ := refType(ref)
	if typ == "" && strings.HasPrefix(ref, "urn:") && len(v.bundles) > 0 {
		typ = v.bundles[len(v.bundles)-1].fullURLTypes[ref]
	}
	if typ == "" {
		if !strings.Contains(ref, ":") && !strings.Contains(ref, "?") {
			v.errorf("value", path.String()+".reference", "relative URLs must be of the format [ResourceName]/[id]; found %q", ref)
		}
		return
	}
	if t := text(n.Type); t != "" && t != typ && spec.IsResource(t) {
		v.errorf("value", path.String()+".reference", "the type %q does not match the reference's type %s", t, typ)
	}
	e := f.Elem
	if e == nil || len(e.Targets) == 0 {
		return
	}
	for _, t := range e.Targets {
		if t == typ {
			return
		}
	}
	v.errorf("structure", path.String()+".reference", "invalid resource target type: found %s, but expected one of (%s)", typ, strings.Join(e.Targets, ", "))
}

// extensionContext checks that an extension whose definition the tables
// hold (the core R4 extensions) is used in one of its declared contexts.
func (v *validator) extensionContext(path *r4.Path, stack []specFrame, url string) {
	def := spec.LookupExtension(url)
	if def == nil || len(v.res) > 0 && conformanceResource[v.res[len(v.res)-1].typ] {
		return
	}
	parent := &stack[len(stack)-2]
	for _, c := range def.Contexts {
		if contextMatches(c, parent) {
			return
		}
	}
	this := "?"
	if parent.Type != nil {
		this = parent.Type.Name
	}
	if parent.Elem != nil && parent.Elem.Path != this {
		this = parent.Elem.Path + ", " + this
	}
	v.errorf("structure", path.String(), "the extension %s is not allowed to be used here (allowed: %s; this element is %s)", url, strings.Join(def.Contexts, ", "), this)
}

// contextMatches reports whether the element of frame f is in the
// extension context c.
func contextMatches(c string, f *specFrame) bool {
	if kind, expr, ok := strings.Cut(c, ":"); ok && !strings.Contains(kind, ".") {
		if kind == "extension" {
			x, isExt := f.Node.(*r4.Extension)
			return isExt && x.URL == expr
		}
		return true // FHIRPath contexts are not checked
	}
	_, isRes := f.Node.(r4.Resource)
	switch c {
	case "Element", "Base":
		return true
	case "Resource", "DomainResource":
		return isRes
	case "BackboneElement":
		return f.Type != nil && f.Type.Kind == spec.Backbone
	}
	if f.Type != nil && (f.Type.Name == c || c == "Quantity" && quantityKinds[f.Type.Name]) {
		return true
	}
	return f.Elem != nil && f.Elem.Path == c
}

// conformanceResource lists the definitional resources whose extensions'
// contexts are not checked: the R4 publication's own definitions use its
// tooling extensions outside their declared contexts (fhir-type on
// ElementDefinition.type, normative-version on CodeSystem and ValueSet),
// and ACDS processes clinical records, not definitions.
var conformanceResource = map[string]bool{
	"StructureDefinition": true, "ValueSet": true, "CodeSystem": true, "OperationDefinition": true,
	"SearchParameter": true, "CapabilityStatement": true, "ImplementationGuide": true, "ConceptMap": true,
	"NamingSystem": true, "StructureMap": true, "CompartmentDefinition": true, "GraphDefinition": true,
	"MessageDefinition": true, "TerminologyCapabilities": true,
}

// quantityKinds are the specialisations of Quantity.
var quantityKinds = map[string]bool{"Age": true, "Count": true, "Distance": true, "Duration": true, "MoneyQuantity": true, "SimpleQuantity": true}

// localRef records a reference "#id" (id "" for "#") in the current
// resource, and in its container when it is a contained resource: dom-3
// looks for references to a contained resource anywhere in the
// container, the other contained resources included.
func (v *validator) localRef(id string) {
	for i := len(v.res) - 1; i >= 0; i-- {
		rc := v.res[i]
		if rc.localRefs == nil {
			rc.localRefs = map[string]bool{}
		}
		if id != "" || i == len(v.res)-1 {
			rc.localRefs[id] = true
		}
		if !rc.isContained {
			return
		}
	}
}

// attachment checks att-1 and Attachment.size against the decoded data.
func (v *validator) attachment(path *r4.Path, n *r4.Attachment) {
	if n.Data != nil && n.ContentType == nil {
		v.errorf("invariant", path.String(), "att-1: if the attachment has data, it shall have a contentType")
	}
	if n.Data == nil || !n.Data.HasValue() || n.Size == nil || !n.Size.HasValue() {
		return
	}
	raw, err := decodeBase64(n.Data.Value)
	if err != nil {
		return
	}
	if size := n.Size.Value; size != int64(len(raw)) {
		v.errorf("structure", path.String(), "stated attachment size %d does not match actual attachment size %d", size, len(raw))
	}
}

func (v *validator) leave(stack []specFrame) {
	if v.ignoredContained(stack) {
		return // enter skipped it
	}
	f := &stack[len(stack)-1]
	t := f.Type
	damaged := v.frames[len(stack)-1].damaged
	if t != nil && len(t.Required) > 0 {
		v.required(stack, f, t, damaged)
	}
	isRes, isPrim := f.kinds()
	if isRes {
		if n, ok := f.Node.(r4.Resource); ok {
			v.leaveResource(stack, n, damaged)
			return
		}
	}
	if t != nil && t.Name == "Observation.component" {
		v.obs6(stack, f)
	}
	if damaged {
		return // ele-1 and ext-1 are about parts that may be missing
	}
	if isPrim {
		if n, ok := f.Node.(r4.Primitive); ok {
			if !n.HasValue() && len(f.Present) == 0 {
				v.errorf("invariant", pathOf(stack), "ele-1: an element must have a value or children")
			}
			return
		}
	}
	if _, isExt := f.Node.(*r4.Extension); isExt {
		hasValue, hasExt := false, false
		for _, p := range f.Present {
			hasValue = hasValue || strings.HasPrefix(p, "value")
			hasExt = hasExt || p == "extension"
		}
		if hasValue == hasExt {
			v.errorf("invariant", pathOf(stack), "ext-1: an extension must have either extensions or value[x], not both")
		}
		return
	}
	if len(f.Present) == 0 {
		v.errorf("invariant", pathOf(stack), "ele-1: an element must have a value or children")
	}
}

// required checks the elements of t with a minimum cardinality (at most 1
// in the base R4 definitions) against the children present.
func (v *validator) required(stack []specFrame, f *specFrame, t *spec.Type, damaged bool) {
	seen := v.frames[len(stack)-1].required
required:
	for _, rp := range t.Required {
		for _, p := range seen {
			if p == rp {
				continue required
			}
		}
		name := rp[strings.LastIndexByte(rp, '.')+1:]
		if x, ok := f.Node.(*r4.Extension); ok && name == "url" && x.URL != "" {
			continue
		}
		where := pathOf(stack)
		if damaged && v.damagedMember(where, t, rp, name) {
			continue // the decoder reported the element and left it out
		}
		v.errorf("required", where, "%s: minimum required = 1, but only found 0", t.Name+"."+name)
	}
}

// obs6 checks obs-6: dataAbsentReason only when there is no value[x].
func (v *validator) obs6(stack []specFrame, f *specFrame) {
	if !f.has("dataAbsentReason") {
		return
	}
	for _, p := range f.Present {
		if strings.HasPrefix(p, "value") && len(p) > 5 {
			v.errorf("invariant", pathOf(stack), "obs-6: dataAbsentReason shall only be present if value[x] is not present")
			return
		}
	}
}

// leaveResource checks the rules that need the whole resource: dom-2,
// dom-3, dom-6, obs-6, ras-2, and the Bundle and Parameters rules.
func (v *validator) leaveResource(stack []specFrame, r r4.Resource, damaged bool) {
	f := &stack[len(stack)-1]
	rc := v.res[len(v.res)-1]
	v.res = v.res[:len(v.res)-1]
	var where string
	at := func() string {
		if where == "" {
			where = pathOf(stack)
		}
		return where
	}
	if rc.isContained {
		if f.has("contained") {
			v.errorf("invariant", at(), "dom-2: a contained resource must not contain resources")
		}
		if p := len(v.res); p > 0 && rc.localRefs[""] && rc.id != "" {
			pr := v.res[p-1]
			if pr.containedRefsUs == nil {
				pr.containedRefsUs = map[string]bool{}
			}
			pr.containedRefsUs[rc.id] = true
		}
	}
	for i, id := range rc.containedID {
		if id != "" && !rc.localRefs[id] && !rc.localRefs[""] && !rc.containedRefsUs[id] && v.checksDom3() {
			v.errorf("invariant", at()+".contained["+strconv.Itoa(i)+"]",
				"dom-3: the contained resource %q is not referenced from elsewhere in the containing resource", id)
		}
	}
	if t := f.Type; t != nil && !v.errorsOnly && !rc.isContained && t.Element("text") != nil && !f.has("text") && !(damaged && v.damaged[at()+".text"]) {
		v.add(SeverityWarning, "invariant", at(), "dom-6: a resource should have narrative for robust management")
	}
	if rc.bundle != nil && rc.version != "" {
		if rc.bundle.versions == nil {
			rc.bundle.versions = map[int]string{}
		}
		rc.bundle.versions[rc.entry] = rc.version
	}
	switch n := r.(type) {
	case *r4.Observation:
		v.obs6(stack, f)
	case *r4.RiskAssessment:
		for i := range n.Prediction {
			if d := n.Prediction[i].ProbabilityDecimal; d != nil && d.HasValue() {
				if x, err := strconv.ParseFloat(d.Value, 64); err == nil && x > 100 {
					v.errorf("invariant", at()+".prediction["+strconv.Itoa(i)+"]", "ras-2: probability must be <= 100")
				}
			}
		}
	case *r4.Bundle:
		v.bundles = v.bundles[:len(v.bundles)-1]
		v.bundleRules(at(), n, rc.ownBundle)
		releaseBundleCtx(rc.ownBundle, len(n.Entry))
		rc.ownBundle = nil
	case *r4.Parameters:
		for _, ref := range rc.ownParams.refs {
			if refType(ref) != "" && !strings.Contains(ref, ":") && !rc.ownParams.ids[strings.SplitN(ref, "/_history/", 2)[0]] {
				v.errorf("not-found", at(), "unable to resolve resource with reference %q", ref)
			}
		}
	}
	v.spare = append(v.spare, rc)
}
