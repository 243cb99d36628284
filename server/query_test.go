package server_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

// Attested queries through POST /v1/process with the FHIR pipeline: the
// output is the Parameters resource and the signed claims bind the query
// and the digest of the normalised record it ran on.
func TestProcessQuery(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	h := newHarness(t, func(c *server.Config) {
		c.Pipeline = server.FHIRPipeline{}
		c.Now = func() time.Time { return now }
	})
	tok := h.anon().Token
	data, err := os.ReadFile("../fhir/testdata/golden/transaction.json")
	if err != nil {
		t.Fatal(err)
	}
	post := func(body map[string]any) (*http.Response, []byte) {
		b, _ := json.Marshal(body)
		return h.do("POST", "/v1/process", tok, b)
	}
	const q = "Observation.where(code.coding.code = '8867-4').value"
	resp, body := post(map[string]any{"data": json.RawMessage(data), "outputFormat": "fhirpath", "query": q})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var acc acds.Accepted
	_ = json.Unmarshal(body, &acc)
	req := h.wait(tok, acc.RequestID, 10*time.Second)
	if req.Status != acds.StatusCompleted {
		t.Fatalf("request %+v", req.Error)
	}
	r := req.Result
	if r.OutputFormat != acds.OutputFHIRPath || !strings.Contains(string(r.Output), `"valueQuantity":{"code":"/min"`) || r.DisclosureKey != "" {
		t.Fatalf("result %s (key %q)", r.Output, r.DisclosureKey)
	}
	raw, _ := base64.StdEncoding.DecodeString(r.AttestationBundle)
	var fb servertest.FakeBundle
	if err := json.Unmarshal(raw, &fb); err != nil {
		t.Fatal(err)
	}
	rec, err := fhir.Process(data, fhir.Options{Format: acds.OutputFHIRR4, Source: "raw", Measurement: servertest.NewEnclave().Measurement(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	c := fb.Claims
	if c.Query == nil || c.Query.Expression != q || c.Query.RecordDigest != rec.Digest || c.OutputDigest != r.OutputDigest || c.Entries != nil {
		t.Fatalf("claims %+v query %+v, want record %s", c, c.Query, rec.Digest)
	}

	// Refused at acceptance: a query that does not parse (naming the
	// position), a query without fhirpath, fhirpath without a query.
	for name, c := range map[string]struct {
		body map[string]any
		says string
	}{
		"syntax":         {map[string]any{"data": json.RawMessage(data), "outputFormat": "fhirpath", "query": "Observation.where("}, "offset 18"},
		"not fhirpath":   {map[string]any{"data": json.RawMessage(data), "outputFormat": "fhir_r4", "query": "Patient"}, "only with outputFormat fhirpath"},
		"no query":       {map[string]any{"data": json.RawMessage(data), "outputFormat": "fhirpath"}, "required"},
		"query a number": {map[string]any{"data": json.RawMessage(data), "outputFormat": "fhirpath", "query": 3}, "must be a string"},
	} {
		resp, body := post(c.body)
		var p acds.Problem
		_ = json.Unmarshal(body, &p)
		if resp.StatusCode != http.StatusBadRequest || p.Type != "urn:acds:problem:invalid-request" || len(p.Errors) != 1 || p.Errors[0].Field != "query" || !strings.Contains(p.Errors[0].Message, c.says) {
			t.Errorf("%s: status %d %s", name, resp.StatusCode, body)
		}
	}

	// Evaluation bounded: a result too large ends the request with a
	// problem on the query, not an internal error.
	resp, body = post(map[string]any{"data": json.RawMessage(data), "outputFormat": "fhirpath", "query": "%bundle.descendants().select(%bundle.descendants().select(1))"})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	_ = json.Unmarshal(body, &acc)
	req = h.wait(tok, acc.RequestID, 20*time.Second)
	if req.Status != acds.StatusFailed || req.Error == nil || len(req.Error.Errors) != 1 || req.Error.Errors[0].Field != "query" || !strings.Contains(req.Error.Detail, "limit") {
		t.Fatalf("over the limits: %+v", req.Error)
	}
}

// fhir_r4_ips through POST /v1/process: a document Bundle, committed entry
// by entry like the other Bundle formats.
func TestProcessIPS(t *testing.T) {
	h := newHarness(t, func(c *server.Config) { c.Pipeline = server.FHIRPipeline{} })
	tok := h.anon().Token
	data, err := os.ReadFile("../fhir/testdata/golden/transaction.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"data": json.RawMessage(data), "outputFormat": "fhir_r4_ips"})
	resp, body := h.do("POST", "/v1/process", tok, b)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var acc acds.Accepted
	_ = json.Unmarshal(body, &acc)
	req := h.wait(tok, acc.RequestID, 10*time.Second)
	if req.Status != acds.StatusCompleted || req.Result.OutputFormat != acds.OutputFHIRR4IPS || req.Result.DisclosureKey == "" ||
		!strings.Contains(string(req.Result.Output), `"type":"document"`) || !strings.Contains(string(req.Result.Output), `"code":"60591-5"`) {
		t.Fatalf("request %+v", req)
	}
}
