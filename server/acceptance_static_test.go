package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/testrig/corpus"
	"github.com/acds-project/acds/server"
)

// Requests bound to fail are refused when they arrive (DESIGN §3), by the
// real FHIR pipeline's own rules, never accepted and failed later.

// TestQueryUnknownVariableRefused: a query naming an environment variable
// the enclave's evaluation does not provide is a static error, refused at
// once on both accepting endpoints with 400 invalid-request on query, as
// an unknown function is; the built-in variables are accepted.
func TestQueryUnknownVariableRefused(t *testing.T) {
	h := newHarness(t, func(c *server.Config) { c.Pipeline = server.FHIRPipeline{} })
	tok := h.anon().Token
	data, err := os.ReadFile("../fhir/testdata/golden/transaction.json")
	if err != nil {
		t.Fatal(err)
	}
	for q, says := range map[string]string{
		"%nosuch":    "semantic error at offset 0: unknown environment variable %nosuch",
		"nosuchfn()": "semantic error at offset 0: unknown function nosuchfn()",
		"Observation.where(subject.resolve() = %patient)": "semantic error at offset 38: unknown environment variable %patient",
	} {
		for _, path := range []string{"/v1/process", "/v1/fetch-and-attest"} {
			body := map[string]any{"data": json.RawMessage(data), "outputFormat": acds.OutputFHIRPath, "query": q}
			if path == "/v1/fetch-and-attest" {
				body = map[string]any{"systemType": "demo", "portalUrl": "https://portal.example", "recordId": "1",
					"username": "u", "password": "p", "outputFormat": acds.OutputFHIRPath, "query": q}
			}
			resp, b := h.do("POST", path, tok, body)
			p := wantProblem(t, resp, b, acds.ProblemInvalidRequest)
			if len(p.Errors) != 1 || p.Errors[0].Field != "query" || !strings.Contains(p.Errors[0].Message, says) {
				t.Errorf("%s %q: %s, want query: %s", path, q, b, says)
			}
		}
	}
	for _, q := range []string{"%bundle.entry.count()", "%resource.count()", "%`vs-administrative-gender`"} {
		resp, b := h.do("POST", "/v1/process", tok, map[string]any{"data": json.RawMessage(data), "outputFormat": acds.OutputFHIRPath, "query": q})
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%q: status %d %s", q, resp.StatusCode, b)
		}
		req := h.wait(tok, decode[acds.Accepted](t, b).RequestID, 10*time.Second)
		if req.Status != acds.StatusCompleted {
			t.Errorf("%q: %+v", q, req.Error)
		}
	}
}

// TestIPSWithoutPatientRefused: POST /v1/process asking for an
// International Patient Summary of a record without a Patient is refused
// at once with the 422 invalid-fhir problem the worker would fail it with
// (the same detail and OperationOutcome), while the same record is
// accepted for fhir_r4, and an IPS of a record with a Patient is accepted.
func TestIPSWithoutPatientRefused(t *testing.T) {
	const practitioner = `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:0b5f2b4e-7d1c-4c3a-9a57-2b8f0c1d2e3f","resource":{"resourceType":"Practitioner","id":"pr1","name":[{"family":"Who"}]}}]}`
	inputs := []string{practitioner, string(corpus.Read(t, corpus.Practitioners))}
	h := newHarness(t, func(c *server.Config) { c.Pipeline = server.FHIRPipeline{} })
	// processOnly (server_test.go) hides the pipeline's checks: what the
	// worker alone decides.
	later := newHarness(t, func(c *server.Config) { c.Pipeline = processOnly{server.FHIRPipeline{}} })
	tok, laterTok := h.anon().Token, later.anon().Token
	for _, in := range inputs {
		body := map[string]any{"data": json.RawMessage(in), "outputFormat": acds.OutputFHIRR4IPS}
		resp, b := h.do("POST", "/v1/process", tok, body)
		p := wantProblem(t, resp, b, acds.ProblemInvalidFHIR)
		if !strings.Contains(string(p.OperationOutcome), "an International Patient Summary needs a Patient: the record holds none") {
			t.Errorf("refusal %s does not say why", b)
		}
		// What the worker decides on its own: the same problem, later.
		resp, lb := later.do("POST", "/v1/process", laterTok, body)
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("without the check: status %d %s", resp.StatusCode, lb)
		}
		req := later.wait(laterTok, decode[acds.Accepted](t, lb).RequestID, 10*time.Second)
		if req.Status != acds.StatusFailed || req.Error == nil || req.Error.Type != p.Type || req.Error.Detail != p.Detail ||
			!bytes.Equal(req.Error.OperationOutcome, p.OperationOutcome) {
			t.Errorf("at acceptance %s; the worker failed it with %+v", b, req.Error)
		}
		body["outputFormat"] = acds.OutputFHIRR4
		if resp, b := h.do("POST", "/v1/process", tok, body); resp.StatusCode != http.StatusAccepted {
			t.Errorf("fhir_r4: status %d %s", resp.StatusCode, b)
		}
	}
	data, err := os.ReadFile("../fhir/testdata/golden/transaction.json")
	if err != nil {
		t.Fatal(err)
	}
	resp, b := h.do("POST", "/v1/process", tok, map[string]any{"data": json.RawMessage(data), "outputFormat": acds.OutputFHIRR4IPS})
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("IPS of a record with a Patient: status %d %s", resp.StatusCode, b)
	}
}

// TestMalformedDataAnswersAsStrict: POST /v1/process leaves the syntax of
// the data to FHIRPipeline's check (it only delimits the data), yet every
// body with malformed data gets the answer a server checking the whole
// body up front gives — the same status and problem, whatever else is
// wrong with the request too — and nothing is accepted.
func TestMalformedDataAnswersAsStrict(t *testing.T) {
	deferred := newHarness(t, func(c *server.Config) { c.Pipeline = server.FHIRPipeline{} })
	strict := newHarness(t, func(c *server.Config) { c.Pipeline = processOnly{server.FHIRPipeline{}} })
	dt, st := deferred.anon().Token, strict.anon().Token
	const p = `"resourceType":"Patient","id":"p1"`
	for _, body := range []string{
		`{"data":{` + p + `,},"outputFormat":"fhir_r4"}`,
		`{"data":{` + p + ` "active":true},"outputFormat":"fhir_r4"}`,
		`{"data":{` + p + `,"active":tru},"outputFormat":"fhir_r4"}`,
		`{"data":{` + p + `,"multipleBirthInteger":01},"outputFormat":"fhir_r4"}`,
		`{"data":{` + p + `,"gender":"\x"},"outputFormat":"fhir_r4"}`,
		`{"data":{` + p + `,"gender":"` + "\x01" + `"},"outputFormat":"fhir_r4"}`,
		`{"data":{` + p + `]},"outputFormat":"fhir_r4"}`,
		`{"data":{` + p + `,"name":[{"family":"D"},]},"outputFormat":"fhir_r4"}`,
		`{"data":{` + p + `,},"outputFormat":7}`,
		`{"data":{` + p + `,}}`,
		`{"data":{` + p + `,},"outputFormat":"no-such-format"}`,
		`{"data":{` + p + `,},"outputFormat":"fhir_r4","callbackUrl":"http://127.0.0.1/x"}`,
		`{"data":{` + p + `,},"outputFormat":"fhir_r4","extra":1}`,
		`{"data":{` + p + `,},"data":{},"outputFormat":"fhir_r4"}`,
		`{"data":{` + p + `}}},"outputFormat":"fhir_r4"}`,
		`{"data":{` + p + `,"gender":"male}`,
		`{"data":{` + p + `,"gender":"male\`,
	} {
		dr, db := deferred.do("POST", "/v1/process", dt, body)
		sr, sb := strict.do("POST", "/v1/process", st, body)
		if dr.StatusCode == http.StatusAccepted || dr.StatusCode != sr.StatusCode {
			t.Errorf("%s: status %d, strict %d", body, dr.StatusCode, sr.StatusCode)
			continue
		}
		dp, sp := decode[acds.Problem](t, db), decode[acds.Problem](t, sb)
		if dp.Type != sp.Type || dp.Detail != sp.Detail || len(dp.Errors) != len(sp.Errors) {
			t.Errorf("%s:\n got    %s\n strict %s", body, db, sb)
		}
	}
	// Well-formed data that is not valid FHIR is refused by the check.
	resp, b := deferred.do("POST", "/v1/process", dt, `{"data":{`+p+`,"gender":7},"outputFormat":"fhir_r4"}`)
	wantProblem(t, resp, b, acds.ProblemInvalidFHIR)
}
