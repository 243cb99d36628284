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
	inputs := []string{practitioner}
	if b, err := os.ReadFile("/work/shared/testdata/synthea/practitionerInformation1559319163815.json"); err == nil {
		inputs = append(inputs, string(b))
	}
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
