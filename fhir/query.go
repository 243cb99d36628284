package fhir

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir/fhirpath"
	"github.com/acds-project/acds/fhir/r4"
)

// Attested queries (DESIGN §9): acds.OutputFHIRPath evaluates Options.Query
// over the normalised record and returns a Parameters resource:
//
//	{"parameter":[{"name":"expression","valueString":"<query>"},
//	              {"name":"result","valueQuantity":{…}}, …],
//	 "resourceType":"Parameters"}
//
// The input collection is the record's entry resources (so
// Observation.where(…) selects observations) and %bundle is the whole
// normalised Bundle. Each value becomes one "result" parameter, typed:
// FHIRPath Booleans, Integers, Decimals, Strings, Dates, DateTimes, Times
// and Quantities as valueBoolean … valueQuantity; FHIR primitives and data
// types as value[x] of their type; resources as "resource". A value no
// Parameters can hold (a backbone element such as Observation.component)
// fails the query rather than being dropped.

// QueryLimits bound one query. Zero fields take the defaults.
type QueryLimits struct {
	// Timeout bounds the evaluation's wall time. Zero: 10 s.
	Timeout time.Duration
	// MaxSteps bounds the evaluation's work (fhirpath.Limits). Zero:
	// 10,000,000.
	MaxSteps int
	// MaxResults bounds the values of the result. Zero: 1000.
	MaxResults int
	// MaxBytes bounds the output's size. Zero: 4 MiB.
	MaxBytes int
}

func (l QueryLimits) withDefaults() QueryLimits {
	if l.Timeout <= 0 {
		l.Timeout = 10 * time.Second
	}
	if l.MaxSteps <= 0 {
		l.MaxSteps = 10_000_000
	}
	if l.MaxResults <= 0 {
		l.MaxResults = 1000
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = 4 << 20
	}
	return l
}

// ErrQuery is the class of a query that cannot be answered; the error is a
// *QueryError. It also matches the fhirpath class (fhirpath.ErrSyntax,
// ErrLimit, …) when there is one.
var ErrQuery = errors.New("fhir: query failed")

// QueryError says why a query failed.
type QueryError struct {
	// Offset is the byte offset in the expression of the failing part, or
	// -1.
	Offset int
	// Limit is true when a bound of QueryLimits (or of the expression's
	// length) was exceeded.
	Limit bool
	// Msg says what went wrong.
	Msg string
	// Err is the fhirpath error, if any.
	Err error
}

func (e *QueryError) Error() string { return "fhir: query: " + e.Msg }

// Unwrap returns ErrQuery and the underlying error.
func (e *QueryError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrQuery, e.Err}
	}
	return []error{ErrQuery}
}

// CompileQuery parses a query as Process will, so that a server refuses a
// query that does not parse when the request arrives. It also refuses what
// is known wrong before any evaluation: an unknown function, and an
// environment variable the query's evaluation does not provide (queryEnv:
// the built-in ones, %bundle among them, and no others), checked as that
// evaluation checks it (fhirpath.Expression.CheckEnv). The error is a
// *QueryError whose Offset is the position of the error (-1 when none
// applies).
func CompileQuery(query string) (*fhirpath.Expression, error) {
	if strings.TrimSpace(query) == "" {
		return nil, &QueryError{Offset: -1, Msg: "the query is empty"}
	}
	if len(query) > acds.MaxQueryLen {
		return nil, &QueryError{Offset: -1, Limit: true, Msg: fmt.Sprintf("the query is %d bytes, at most %d", len(query), acds.MaxQueryLen)}
	}
	x, err := fhirpath.Compile(query)
	if err != nil {
		var se *fhirpath.SyntaxError
		if errors.As(err, &se) {
			return nil, &QueryError{Offset: se.Offset, Limit: errors.Is(err, fhirpath.ErrLimit),
				Msg: fmt.Sprintf("does not parse at line %d, column %d (offset %d): %s", se.Line, se.Column, se.Offset, se.Msg), Err: err}
		}
		return nil, compileError(err)
	}
	if err := x.CheckEnv(queryEnv(nil, time.Time{}, QueryLimits{})); err != nil {
		return nil, compileError(err)
	}
	return x, nil
}

// compileError is the QueryError of a static error other than a syntax
// error (an unknown function or environment variable), at its offset.
func compileError(err error) *QueryError {
	qe := &QueryError{Offset: -1, Msg: err.Error(), Err: err}
	var ee *fhirpath.EvalError
	if errors.As(err, &ee) {
		qe.Offset = ee.Offset
	}
	return qe
}

// queryEnv is the Env a query is evaluated with: %bundle is the normalised
// record, and there are no variables beyond the built-in ones. CompileQuery
// checks a query's variables against it, so that what evaluation would
// refuse is refused when the query arrives.
func queryEnv(bundle *r4.Bundle, now time.Time, lim QueryLimits) *fhirpath.Env {
	return &fhirpath.Env{Bundle: bundle, Now: now,
		Limits: fhirpath.Limits{MaxSteps: lim.MaxSteps, MaxItems: 10 * lim.MaxResults}}
}

func processQuery(input []byte, opts Options) (*Output, error) {
	x, err := CompileQuery(opts.Query)
	if err != nil {
		return nil, err
	}
	lim := opts.QueryLimits.withDefaults()
	ro := opts
	ro.Format = acds.OutputFHIRR4
	rec, err := Process(input, ro)
	if err != nil {
		return nil, err
	}
	res, err := r4.Unmarshal(rec.JSON)
	if err != nil {
		return nil, fmt.Errorf("fhir: reading the normalised record: %w", err)
	}
	bundle, ok := res.(*r4.Bundle)
	if !ok {
		return nil, fmt.Errorf("fhir: the normalised record is a %s, not a Bundle", res.ResourceType())
	}
	in := make(fhirpath.Collection, 0, len(bundle.Entry))
	for i := range bundle.Entry {
		if r := bundle.Entry[i].Resource; r != nil {
			in = append(in, fhirpath.NodeOf(r))
		}
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	ctx, cancel := context.WithTimeout(context.Background(), lim.Timeout)
	defer cancel()
	got, err := x.Evaluate(ctx, in, queryEnv(bundle, now, lim))
	if err != nil {
		qe := &QueryError{Offset: -1, Limit: errors.Is(err, fhirpath.ErrLimit), Msg: err.Error(), Err: err}
		var ee *fhirpath.EvalError
		if errors.As(err, &ee) {
			qe.Offset = ee.Offset
		}
		if errors.Is(err, context.DeadlineExceeded) {
			qe.Msg = fmt.Sprintf("evaluation exceeded the time limit of %s", lim.Timeout)
		}
		return nil, qe
	}
	if len(got) > lim.MaxResults {
		return nil, &QueryError{Offset: -1, Limit: true, Msg: fmt.Sprintf("the result has %d values, at most %d", len(got), lim.MaxResults)}
	}
	params, err := parametersJSON(opts.Query, got)
	if err != nil {
		return nil, err
	}
	if len(params) > lim.MaxBytes {
		return nil, &QueryError{Offset: -1, Limit: true, Msg: fmt.Sprintf("the result is %d bytes, at most %d", len(params), lim.MaxBytes)}
	}
	pr, err := r4.Unmarshal(params)
	if err != nil {
		return nil, &QueryError{Offset: -1, Msg: "the result is not a valid Parameters resource: " + err.Error(), Err: err}
	}
	out, err := r4.AppendCanonical(make([]byte, 0, len(params)+64), pr)
	if err != nil {
		return nil, fmt.Errorf("fhir: encoding the query result: %w", err)
	}
	sum := sha256.Sum256(out)
	return &Output{Format: acds.OutputFHIRPath, JSON: out, Digest: "sha256:" + hex.EncodeToString(sum[:]),
		Outcome: rec.Outcome, Resources: 1, RecordDigest: rec.Digest}, nil
}

// parametersJSON builds the Parameters resource of a result.
func parametersJSON(query string, c fhirpath.Collection) ([]byte, error) {
	vals, err := fhirpath.MarshalJSON(c)
	if err != nil {
		return nil, &QueryError{Offset: -1, Msg: "encoding the result: " + err.Error(), Err: err}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(vals, &items); err != nil || len(items) != len(c) {
		return nil, fmt.Errorf("fhir: encoding the query result: %d values for %d items", len(items), len(c))
	}
	var b bytes.Buffer
	q, _ := json.Marshal(query)
	b.WriteString(`{"resourceType":"Parameters","parameter":[{"name":"expression","valueString":`)
	b.Write(q)
	b.WriteString(`}`)
	for i, v := range c {
		member, err := resultMember(v)
		if err != nil {
			return nil, &QueryError{Offset: -1, Msg: fmt.Sprintf("result value %d: %v", i, err)}
		}
		b.WriteString(`,{"name":"result","`)
		b.WriteString(member)
		b.WriteString(`":`)
		b.Write(items[i])
		b.WriteString(`}`)
	}
	b.WriteString(`]}`)
	return b.Bytes(), nil
}

// resultMember returns the Parameters.parameter member that holds v.
func resultMember(v fhirpath.Value) (string, error) {
	switch v.(type) {
	case fhirpath.Boolean:
		return "valueBoolean", nil
	case fhirpath.Integer:
		return "valueInteger", nil
	case fhirpath.Decimal:
		return "valueDecimal", nil
	case fhirpath.String:
		return "valueString", nil
	case fhirpath.Date:
		return "valueDate", nil
	case fhirpath.DateTime:
		return "valueDateTime", nil
	case fhirpath.Time:
		return "valueTime", nil
	case fhirpath.Quantity:
		return "valueQuantity", nil
	}
	t, ok := strings.CutPrefix(v.TypeName(), "FHIR.")
	if !ok {
		return "", fmt.Errorf("a %s cannot be a Parameters value", v.TypeName())
	}
	if r4.IsResourceType(t) {
		return "resource", nil
	}
	if !parameterTypes[t] {
		return "", fmt.Errorf("a %s cannot be a Parameters value (select one of its elements instead)", v.TypeName())
	}
	return "value" + strings.ToUpper(t[:1]) + t[1:], nil
}

// parameterTypes are the types of Parameters.parameter.value[x] (R4's
// open type list).
var parameterTypes = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range strings.Fields(`base64Binary boolean canonical code date dateTime decimal id instant integer markdown oid
		positiveInt string time unsignedInt uri url uuid Address Age Annotation Attachment CodeableConcept Coding
		ContactPoint Count Distance Duration HumanName Identifier Money Period Quantity Range Ratio Reference
		SampledData Signature Timing ContactDetail Contributor DataRequirement Expression ParameterDefinition
		RelatedArtifact TriggerDefinition UsageContext Dosage Meta`) {
		m[t] = true
	}
	return m
}()
