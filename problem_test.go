package acds_test

import (
	"encoding/json"
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
		acds.ProblemRecordNotFound: 404, acds.ProblemPortalResponseInvalid: 502,
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
