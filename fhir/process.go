package fhir

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir/r4"
)

// Errors returned by Process. Use errors.Is.
var (
	// ErrInvalid: the input is not valid FHIR R4. The error is an
	// *InvalidError carrying the OperationOutcome.
	ErrInvalid = errors.New("fhir: invalid FHIR R4 input")
	// ErrNotR4: the input is FHIR of another version (DSTU2, STU3). Such
	// errors also match ErrInvalid.
	ErrNotR4 = errors.New("fhir: content is not FHIR R4")
	// ErrUnsupportedFormat: Options.Format names no supported format.
	ErrUnsupportedFormat = errors.New("fhir: unsupported output format")
	// ErrKey: the de-identification key is missing or too short.
	ErrKey = errors.New("fhir: de-identification key must be at least 32 bytes")
)

// InvalidError reports input that failed validation.
type InvalidError struct {
	// Outcome holds every finding: the errors (fatal ones first) come
	// before the warnings, each kind in the order validation found them,
	// so that the reason for the refusal is not behind a hundred
	// best-practice warnings.
	Outcome *OperationOutcome
	NotR4   bool // the content is FHIR of another version
}

// invalid is the InvalidError of a refused input's outcome, its issues
// ordered as InvalidError.Outcome says.
func invalid(outcome *OperationOutcome, notR4 bool) *InvalidError {
	rank := func(s Severity) int {
		switch s {
		case SeverityFatal:
			return 0
		case SeverityError:
			return 1
		case SeverityWarning:
			return 2
		}
		return 3
	}
	slices.SortStableFunc(outcome.Issues, func(a, b Issue) int { return rank(a.Severity) - rank(b.Severity) })
	return &InvalidError{Outcome: outcome, NotR4: notR4}
}

// Error summarises the outcome: the error count and the first error.
func (e *InvalidError) Error() string {
	n := e.Outcome.ErrorCount()
	for _, is := range e.Outcome.Issues {
		if is.Severity == SeverityError || is.Severity == SeverityFatal {
			if e.NotR4 {
				return fmt.Sprintf("fhir: content is not FHIR R4 (%d errors; first: %s)", n, is)
			}
			return fmt.Sprintf("fhir: invalid FHIR R4 input (%d errors; first: %s)", n, is)
		}
	}
	return "fhir: invalid FHIR R4 input"
}

// Is makes errors.Is match ErrInvalid, and ErrNotR4 for other versions.
func (e *InvalidError) Is(target error) bool {
	return target == ErrInvalid || (e.NotR4 && target == ErrNotR4)
}

// Options configures Process.
type Options struct {
	// Format is the output format; the zero value means acds.OutputFHIRR4.
	Format string
	// Source names where the input came from: the portal host for a
	// notarised fetch, or "raw" for a direct submission. Zero means "raw".
	Source string
	// Measurement is the enclave measurement (hex) recorded as the
	// Provenance agent. Zero records "unmeasured".
	Measurement string
	// Now is the recorded time of the Provenance. Zero means time.Now();
	// pass a fixed time for reproducible output.
	Now time.Time
	// DeidentKey is the HMAC key for de-identification pseudonyms, at
	// least 32 bytes; required for acds.OutputFHIRR4Deidentified, unused otherwise.
	// The same key gives the same pseudonyms, so outputs can be linked;
	// the enclave should use a per-deployment secret.
	DeidentKey []byte
	// MaxBytes limits the input size; zero means DefaultMaxBytes.
	MaxBytes int
	// BaseURL is the base of the output entries' fullUrls, which are
	// BaseURL + "/" + type + "/" + id so that the rewritten relative
	// references resolve. Zero means DefaultBaseURL.
	BaseURL string
	// Query is the FHIRPath expression of acds.OutputFHIRPath (see
	// query.go); unused by other formats.
	Query string
	// QueryLimits bound a query's evaluation; zero fields take the
	// defaults of QueryLimits.
	QueryLimits QueryLimits
}

// DefaultBaseURL is the fullUrl base used when Options.BaseURL is empty.
// The .invalid top-level domain (RFC 2606) never resolves: the URLs name
// entries, they are not endpoints.
const DefaultBaseURL = "https://acds.invalid/fhir"

// Output is the result of Process.
type Output struct {
	Format    string            // the output format
	JSON      []byte            // canonical JSON of the output Bundle (see Canonical output)
	Digest    string            // "sha256:" + hex SHA-256 of JSON
	Outcome   *OperationOutcome // validation findings on the input (warnings only, since it passed)
	Resources int               // entries in the output, the Provenance included
	// RecordDigest is, for acds.OutputFHIRPath, the digest of the
	// normalised record (the acds.OutputFHIRR4 output) the query ran on.
	RecordDigest string
	// Entries are, for the Bundle formats (acds.OutputFHIRR4,
	// acds.OutputFHIRR4Deidentified, acds.OutputFHIRR4IPS), the items of
	// the output Bundle's top-level "entry" array as the encoder wrote
	// them: sub-slices of JSON, in order. They are what a selective
	// disclosure commitment covers, handed over so that it need not scan
	// JSON for them. Nil for other formats.
	Entries [][]byte
}

// entrySlices returns the bytes of spans within buf.
func entrySlices(buf []byte, spans []r4.Span) [][]byte {
	entries := make([][]byte, len(spans))
	for i, s := range spans {
		entries[i] = buf[s.Start:s.End:s.End]
	}
	return entries
}

// Process validates input (one FHIR R4 resource or Bundle, JSON), then
// normalises it into a collection Bundle: transaction, batch, searchset
// and other Bundles are flattened, urn:uuid, absolute and relative
// references are rewritten to ResourceType/id (in the entry resources and
// their contained resources; a nested Bundle or Parameters keeps its own),
// duplicate resources are
// removed, and a Provenance resource records the source, the enclave
// measurement and the time. For acds.OutputFHIRR4Deidentified the resources are
// de-identified (HIPAA Safe Harbor) before the Provenance is added. The
// output is canonical JSON, so its digest is stable; processing the output
// again with the same options returns it unchanged (acds.OutputFHIRR4).
//
// Input with validation errors yields an *InvalidError (ErrInvalid, and
// ErrNotR4 for DSTU2/STU3 content). Process does not modify input.
func Process(input []byte, opts Options) (*Output, error) {
	format := opts.Format
	if format == "" {
		format = acds.OutputFHIRR4
	}
	if format == acds.OutputFHIRPath {
		return processQuery(input, opts) // query.go
	}
	if format == acds.OutputFHIRR4IPS {
		return processIPS(input, opts) // ips.go
	}
	if format != acds.OutputFHIRR4 && format != acds.OutputFHIRR4Deidentified {
		return nil, fmt.Errorf("%w: %q (supported: %v)", ErrUnsupportedFormat, format, acds.SupportedOutputFormats())
	}
	if format == acds.OutputFHIRR4Deidentified && len(opts.DeidentKey) < 32 {
		return nil, ErrKey
	}
	return processRecord(input, opts, format, format)
}

// processRecord is Process into the Bundle of format (acds.OutputFHIRR4 or
// acds.OutputFHIRR4Deidentified) for a request asking for the output
// format asked: format itself, or one made from the normalised record
// (acds.OutputFHIRR4IPS). Input that cannot give asked is refused before
// normalisation, by refused, as Check refuses it.
func processRecord(input []byte, opts Options, format, asked string) (*Output, error) {
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	outcome, root, notR4 := decodeAndValidate(input, maxBytes)
	if err := refused(outcome, root, notR4, asked); err != nil {
		return nil, err
	}
	out, count, err := normalize(root, opts, format)
	if err != nil {
		return nil, err
	}
	if count < 2 {
		outcome.Issues = append(outcome.Issues, noResources())
		return nil, invalid(outcome, false)
	}
	// The output is about the input's size (compact), plus fullUrls and
	// the Provenance: size the buffer for that.
	buf, spans, err := r4.AppendCanonicalBundle(make([]byte, 0, len(input)+len(input)/8+1024+64*count), out)
	if err != nil {
		return nil, fmt.Errorf("fhir: encoding output: %w", err)
	}
	sum := sha256.Sum256(buf)
	return &Output{Format: format, JSON: buf, Digest: "sha256:" + hex.EncodeToString(sum[:]), Outcome: outcome, Resources: count,
		Entries: entrySlices(buf, spans)}, nil
}

// Check validates input as Process does, without normalising it: it
// returns nil when Process would accept the input for Options.Format, and
// otherwise the same *InvalidError (ErrInvalid, and ErrNotR4 for other
// FHIR versions). Besides valid FHIR R4 with resources to process, a
// format may need more of the input: acds.OutputFHIRR4IPS needs a
// Patient. Only Options.MaxBytes and Options.Format are used (the zero
// Format is acds.OutputFHIRR4; an unsupported one is not Check's to
// refuse). A server can call Check when a submission arrives and Process
// later, in a worker.
func Check(input []byte, opts Options) error {
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	outcome, root, notR4 := decodeAndCheck(input, maxBytes)
	if refused(outcome, root, notR4, opts.Format) == nil {
		return nil
	}
	// Refused: validate again in full, so the outcome also carries the
	// warnings, exactly as Process would report it.
	outcome, root, notR4 = decodeAndValidate(input, maxBytes)
	return refused(outcome, root, notR4, opts.Format)
}

// refused is the one rule by which Process and Check refuse a decoded and
// validated input (root, with its outcome) for the output format asked:
// the *InvalidError of validation errors, of an input without resources to
// process, or of a record the format cannot be made from (an International
// Patient Summary of a record without a Patient, ipsProblem); nil when
// the input is accepted. A refusal adds its issue to outcome.
func refused(outcome *OperationOutcome, root r4.Resource, notR4 bool, asked string) error {
	if outcome.HasErrors() {
		return invalid(outcome, notR4)
	}
	if !hasResources(root) {
		outcome.Issues = append(outcome.Issues, noResources())
		return invalid(outcome, false)
	}
	if asked == acds.OutputFHIRR4IPS {
		if is := ipsProblem(root); is != nil {
			outcome.Issues = append(outcome.Issues, *is)
			return invalid(outcome, false)
		}
	}
	return nil
}

func noResources() Issue {
	return Issue{Severity: SeverityError, Code: "required",
		Diagnostics: "the input holds no resources to process", Expression: []string{"Bundle.entry"}}
}
