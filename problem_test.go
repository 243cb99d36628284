package acds_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/acds-project/acds"
)

func TestProblemCodes(t *testing.T) {
	want := map[string]int{
		acds.ProblemInvalidJSON: 400, acds.ProblemInvalidRequest: 400, acds.ProblemUnsupportedMediaType: 415,
		acds.ProblemPayloadTooLarge: 413, acds.ProblemUnauthorized: 401, acds.ProblemNotFound: 404,
		acds.ProblemMethodNotAllowed: 405, acds.ProblemUnsupportedSystemType: 422, acds.ProblemUnsupportedOutputFormat: 422,
		acds.ProblemInvalidFHIR: 422, acds.ProblemForbiddenPortal: 403, acds.ProblemRateLimited: 429,
		acds.ProblemUnavailable: 503, acds.ProblemInternal: 500,
		acds.ProblemPortalAuthFailed: 422, acds.ProblemPortalMFARequired: 422, acds.ProblemPortalUnavailable: 502,
		acds.ProblemRecordNotFound: 404, acds.ProblemPortalResponseInvalid: 502, acds.ProblemPortalUnsupported: 422,
	}
	for code, status := range want {
		p := acds.NewProblem(code, "d")
		if p.Status != status || p.Type != "urn:acds:problem:"+code || p.Code() != code || p.Title == "" || p.Title != acds.ProblemTitle(code) || (code != acds.ProblemInternal && p.Title == "Internal error") {
			t.Errorf("%s: %+v", code, p)
		}
		if !strings.Contains(p.Error(), code) {
			t.Errorf("%s: Error() = %q", code, p.Error())
		}
	}
	if acds.ProblemStatus("nonsense") != 500 {
		t.Error("unknown code is not 500")
	}
	b, _ := json.Marshal(acds.Problem{Type: "urn:acds:problem:internal", Title: "t", Status: 500, RetryAfter: 3})
	if strings.Contains(string(b), "etry") {
		t.Errorf("RetryAfter leaked into JSON: %s", b)
	}
	var nilP *acds.Problem
	if nilP.Is(acds.NewProblem(acds.ProblemInternal, "")) || acds.NewProblem(acds.ProblemInternal, "").Is(nilP) {
		t.Error("nil problems match")
	}
}

func TestRequestDone(t *testing.T) {
	for s, done := range map[string]bool{acds.StatusProcessing: false, acds.StatusCompleted: true, acds.StatusFailed: true} {
		if (&acds.Request{Status: s}).Done() != done {
			t.Errorf("%s", s)
		}
	}
}

// TestProblemClasses: every code has a class that errors.Is matches
// against any problem of that code (wrapped or not, whatever its detail)
// and against no other.
func TestProblemClasses(t *testing.T) {
	classes := map[string]*acds.Problem{
		acds.ProblemInvalidJSON: acds.ErrInvalidJSON, acds.ProblemInvalidRequest: acds.ErrInvalidRequest,
		acds.ProblemUnsupportedMediaType: acds.ErrUnsupportedMediaType, acds.ProblemPayloadTooLarge: acds.ErrPayloadTooLarge,
		acds.ProblemUnauthorized: acds.ErrUnauthorized, acds.ProblemNotFound: acds.ErrNotFound,
		acds.ProblemMethodNotAllowed: acds.ErrMethodNotAllowed, acds.ProblemUnsupportedSystemType: acds.ErrUnsupportedSystemType,
		acds.ProblemUnsupportedOutputFormat: acds.ErrUnsupportedOutputFormat, acds.ProblemInvalidFHIR: acds.ErrInvalidFHIR,
		acds.ProblemForbiddenPortal: acds.ErrForbiddenPortal, acds.ProblemRateLimited: acds.ErrRateLimited,
		acds.ProblemUnavailable: acds.ErrUnavailable, acds.ProblemInternal: acds.ErrInternal,
		acds.ProblemPortalAuthFailed: acds.ErrPortalAuthFailed, acds.ProblemPortalMFARequired: acds.ErrPortalMFARequired,
		acds.ProblemPortalUnavailable: acds.ErrPortalUnavailable, acds.ProblemRecordNotFound: acds.ErrRecordNotFound,
		acds.ProblemPortalResponseInvalid: acds.ErrPortalResponseInvalid, acds.ProblemPortalUnsupported: acds.ErrPortalUnsupported,
	}
	if len(classes) != 20 {
		t.Fatalf("%d classes for 20 codes", len(classes))
	}
	for code, class := range classes {
		if class.Code() != code || class.Status != acds.ProblemStatus(code) {
			t.Errorf("class of %s is %+v", code, class)
		}
		err := fmt.Errorf("context: %w", acds.NewProblem(code, "this occurrence"))
		for other, oc := range classes {
			if got := errors.Is(err, oc); got != (other == code) {
				t.Errorf("errors.Is(%s problem, class %s) = %v", code, other, got)
			}
		}
	}
}

// TestRequestErr: only a failed record has an error, and a failed record
// always has one.
func TestRequestErr(t *testing.T) {
	p := acds.NewProblem(acds.ProblemRecordNotFound, "no such patient")
	for _, c := range []struct {
		r    *acds.Request
		want error
	}{
		{nil, nil},
		{&acds.Request{Status: acds.StatusProcessing}, nil},
		{&acds.Request{Status: acds.StatusCompleted, Error: p}, nil},
		{&acds.Request{Status: acds.StatusFailed, Error: p}, acds.ErrRecordNotFound},
		{&acds.Request{Status: acds.StatusFailed}, acds.ErrInternal},
	} {
		err := c.r.Err()
		if (err == nil) != (c.want == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%+v.Err() = %v, want %v", c.r, err, c.want)
		}
	}
}

// TestProblemErrorSaysEachThingOnce: a one-field problem whose detail is
// its field error is not said twice by Error.
func TestProblemErrorSaysEachThingOnce(t *testing.T) {
	p := acds.NewProblem(acds.ProblemInvalidRequest, "query: does not parse")
	p.Errors = []acds.FieldError{{Field: "query", Message: "does not parse"}}
	if got := p.Error(); strings.Count(got, "does not parse") != 1 {
		t.Errorf("Error() = %q", got)
	}
	p.Errors = append(p.Errors, acds.FieldError{Field: "data", Message: "required"})
	if got := p.Error(); !strings.Contains(got, "; data: required") || strings.Count(got, "does not parse") != 1 {
		t.Errorf("Error() = %q", got)
	}
}
