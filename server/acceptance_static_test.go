package server_test

import (
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
