package acds

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ProblemTypePrefix starts the Type of every Problem; the stable problem code follows it.
const ProblemTypePrefix = "urn:acds:problem:"

// Problem codes. The Type of a Problem is ProblemTypePrefix + code; the
// codes are stable API.
const (
	ProblemInvalidJSON             = "invalid-json"              // 400: the body is not well-formed JSON
	ProblemInvalidRequest          = "invalid-request"           // 400: well-formed JSON that breaks the schema; Errors names the fields
	ProblemUnsupportedMediaType    = "unsupported-media-type"    // 415: Content-Type is not application/json
	ProblemPayloadTooLarge         = "payload-too-large"         // 413: the body exceeds the configured limit
	ProblemUnauthorized            = "unauthorized"              // 401: missing, malformed, unknown or expired token; failed recovery
	ProblemNotFound                = "not-found"                 // 404: no such resource visible to the caller
	ProblemMethodNotAllowed        = "method-not-allowed"        // 405: the path exists but not with this method
	ProblemUnsupportedSystemType   = "unsupported-system-type"   // 422: systemType is not one of SystemTypes
	ProblemUnsupportedOutputFormat = "unsupported-output-format" // 422: outputFormat is not one of SupportedOutputFormats
	ProblemInvalidFHIR             = "invalid-fhir"              // 422: the FHIR input has errors; OperationOutcome says which
	ProblemForbiddenPortal         = "forbidden-portal"          // 403: the portal URL is refused (not https, private address, ...)
	ProblemRateLimited             = "rate-limited"              // 429: too many requests; see Retry-After
	ProblemUnavailable             = "unavailable"               // 503: a part of the service is not available
	ProblemInternal                = "internal"                  // 500: an unexpected server error

	// Codes of failed fetch-and-attest requests (the error of a request
	// record; never an HTTP answer of this API).
	ProblemPortalAuthFailed      = "portal-auth-failed"      // 422: the portal refused the credentials
	ProblemPortalMFARequired     = "portal-mfa-required"     // 422: the portal wants a second factor
	ProblemPortalUnavailable     = "portal-unavailable"      // 502: the portal could not be reached or kept failing
	ProblemRecordNotFound        = "record-not-found"        // 404: the portal has no such record for these credentials
	ProblemPortalResponseInvalid = "portal-response-invalid" // 502: the portal answered something that is not valid FHIR, or too much
	ProblemPortalUnsupported     = "portal-unsupported"      // 422: the portal cannot serve this systemType as registered (no password grant, a login that needs a browser, a refused scope or client)
)

// ProblemStatus returns the HTTP status that the server uses for a problem
// code, or 500 for an unknown code. The statuses are written as numbers
// (named in comments, as RFC 9110 names them) so that this package, which
// verify depends on, does not import net/http.
func ProblemStatus(code string) int {
	switch code {
	case ProblemInvalidJSON, ProblemInvalidRequest:
		return 400 // Bad Request
	case ProblemUnsupportedMediaType:
		return 415 // Unsupported Media Type
	case ProblemPayloadTooLarge:
		return 413 // Content Too Large
	case ProblemUnauthorized:
		return 401 // Unauthorized
	case ProblemNotFound:
		return 404 // Not Found
	case ProblemMethodNotAllowed:
		return 405 // Method Not Allowed
	case ProblemUnsupportedSystemType, ProblemUnsupportedOutputFormat, ProblemInvalidFHIR,
		ProblemPortalAuthFailed, ProblemPortalMFARequired, ProblemPortalUnsupported:
		return 422 // Unprocessable Content
	case ProblemRecordNotFound:
		return 404 // Not Found
	case ProblemPortalUnavailable, ProblemPortalResponseInvalid:
		return 502 // Bad Gateway
	case ProblemForbiddenPortal:
		return 403 // Forbidden
	case ProblemRateLimited:
		return 429 // Too Many Requests
	case ProblemUnavailable:
		return 503 // Service Unavailable
	default:
		return 500 // Internal Server Error
	}
}

// ProblemTitle returns the fixed human-readable title for a problem code.
func ProblemTitle(code string) string {
	switch code {
	case ProblemInvalidJSON:
		return "Malformed JSON"
	case ProblemInvalidRequest:
		return "Invalid request"
	case ProblemUnsupportedMediaType:
		return "Unsupported media type"
	case ProblemPayloadTooLarge:
		return "Payload too large"
	case ProblemUnauthorized:
		return "Unauthorized"
	case ProblemNotFound:
		return "Not found"
	case ProblemMethodNotAllowed:
		return "Method not allowed"
	case ProblemUnsupportedSystemType:
		return "Unsupported system type"
	case ProblemUnsupportedOutputFormat:
		return "Unsupported output format"
	case ProblemInvalidFHIR:
		return "Invalid FHIR"
	case ProblemForbiddenPortal:
		return "Forbidden portal"
	case ProblemRateLimited:
		return "Rate limited"
	case ProblemUnavailable:
		return "Unavailable"
	case ProblemPortalAuthFailed:
		return "Portal login failed"
	case ProblemPortalMFARequired:
		return "Portal requires multi-factor authentication"
	case ProblemPortalUnavailable:
		return "Portal unavailable"
	case ProblemRecordNotFound:
		return "Record not found"
	case ProblemPortalResponseInvalid:
		return "Portal response invalid"
	case ProblemPortalUnsupported:
		return "Portal unsupported"
	default:
		return "Internal error"
	}
}

// FieldError names one field of a request body or query that is invalid.
// Field is a dotted JSON path ("portalUrl", "data") or a query parameter.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Problem is an RFC 9457 problem detail, the body of every error response.
// It implements error, so a client returns it and callers reach it with
// errors.As.
type Problem struct {
	Type   string `json:"type"`             // ProblemTypePrefix + code
	Title  string `json:"title"`            // fixed per code
	Status int    `json:"status"`           // the HTTP status
	Detail string `json:"detail,omitempty"` // what went wrong in this occurrence
	// Instance identifies the occurrence, e.g. the request it belongs to.
	Instance string       `json:"instance,omitempty"`
	Errors   []FieldError `json:"errors,omitempty"`
	// OperationOutcome is the FHIR OperationOutcome of an invalid-fhir problem.
	OperationOutcome json.RawMessage `json:"operationOutcome,omitempty"`
	// RetryAfter is the Retry-After header of the response in seconds, when
	// it had one (429, 503). It is not part of the JSON body.
	RetryAfter int `json:"-"`
}

// NewProblem returns the Problem for a code with its standard status and
// title and the given detail.
func NewProblem(code, detail string) *Problem {
	return &Problem{
		Type:   ProblemTypePrefix + code,
		Title:  ProblemTitle(code),
		Status: ProblemStatus(code),
		Detail: detail,
	}
}

// Code returns the stable problem code: Type without ProblemTypePrefix.
func (p *Problem) Code() string {
	return strings.TrimPrefix(p.Type, ProblemTypePrefix)
}

// Error describes the problem in one line.
func (p *Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "acds: %s (%d)", p.Code(), p.Status)
	if p.Detail != "" {
		b.WriteString(": ")
		b.WriteString(p.Detail)
	}
	for _, e := range p.Errors {
		if fe := e.Field + ": " + e.Message; fe != p.Detail { // a one-field problem's detail is often just that
			b.WriteString("; ")
			b.WriteString(fe)
		}
	}
	return b.String()
}

// Is reports whether target is a *Problem with the same Type, so that
// errors.Is(err, acds.ErrNotFound) (or any *Problem of that code) matches
// every not-found problem, whatever its detail.
func (p *Problem) Is(target error) bool {
	t, ok := target.(*Problem)
	return ok && t != nil && p != nil && t.Type == p.Type
}

// Problem classes, one per code, for errors.Is: errors.Is(err,
// acds.ErrPortalAuthFailed) reports whether err is (or wraps) a Problem of
// that code, whatever its detail. They are values to compare with, never
// to return or modify.
var (
	ErrInvalidJSON             = problemClass(ProblemInvalidJSON)
	ErrInvalidRequest          = problemClass(ProblemInvalidRequest)
	ErrUnsupportedMediaType    = problemClass(ProblemUnsupportedMediaType)
	ErrPayloadTooLarge         = problemClass(ProblemPayloadTooLarge)
	ErrUnauthorized            = problemClass(ProblemUnauthorized)
	ErrNotFound                = problemClass(ProblemNotFound)
	ErrMethodNotAllowed        = problemClass(ProblemMethodNotAllowed)
	ErrUnsupportedSystemType   = problemClass(ProblemUnsupportedSystemType)
	ErrUnsupportedOutputFormat = problemClass(ProblemUnsupportedOutputFormat)
	ErrInvalidFHIR             = problemClass(ProblemInvalidFHIR)
	ErrForbiddenPortal         = problemClass(ProblemForbiddenPortal)
	ErrRateLimited             = problemClass(ProblemRateLimited)
	ErrUnavailable             = problemClass(ProblemUnavailable)
	ErrInternal                = problemClass(ProblemInternal)
	ErrPortalAuthFailed        = problemClass(ProblemPortalAuthFailed)
	ErrPortalMFARequired       = problemClass(ProblemPortalMFARequired)
	ErrPortalUnavailable       = problemClass(ProblemPortalUnavailable)
	ErrRecordNotFound          = problemClass(ProblemRecordNotFound)
	ErrPortalResponseInvalid   = problemClass(ProblemPortalResponseInvalid)
	ErrPortalUnsupported       = problemClass(ProblemPortalUnsupported)
)

func problemClass(code string) *Problem {
	return &Problem{Type: ProblemTypePrefix + code, Title: ProblemTitle(code), Status: ProblemStatus(code)}
}
