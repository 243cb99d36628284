package server

import (
	"errors"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/fhir"
)

// Attested queries (DESIGN §9): outputFormat fhirpath with the extension
// field query, on /v1/process and /v1/fetch-and-attest.

// queryProblem decides at acceptance whether format and query go together
// and the query parses, with the rule Process applies later
// (fhir.CompileQuery): a query that does not parse is 400
// invalid-request naming its position.
func queryProblem(format, query string) *acds.Problem {
	if format != acds.OutputFHIRPath {
		if query != "" {
			return fieldProblem("query", "only with outputFormat "+acds.OutputFHIRPath)
		}
		return nil
	}
	if query == "" {
		return fieldProblem("query", "required with outputFormat "+acds.OutputFHIRPath)
	}
	if _, err := fhir.CompileQuery(query); err != nil {
		var qe *fhir.QueryError
		if errors.As(err, &qe) {
			return fieldProblem("query", qe.Msg)
		}
		return fieldProblem("query", err.Error())
	}
	return nil
}

// queryClaim starts the query claim of a request: the expression now, the
// record digest once the pipeline has run (finish). Nil without a query.
func queryClaim(query string) *attestation.QueryClaim {
	if query == "" {
		return nil
	}
	return &attestation.QueryClaim{Expression: query}
}

// queryFailed is the problem of a query the pipeline could not answer
// (an evaluation error, or a bound of time or size exceeded), or nil when
// err is not a query's.
func queryFailed(err error) *acds.Problem {
	var qe *fhir.QueryError
	if !errors.As(err, &qe) {
		return nil
	}
	p := fieldProblem("query", qe.Msg)
	if qe.Limit {
		p.Detail = "query: the evaluation exceeded a limit: " + qe.Msg
	}
	return p
}
