package server_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/store"
)

// TestGetSendsStoredResultAsStored: GET /v1/requests/{id} sends a completed
// request's stored result (without decoding it again) as the record's one
// result member; a stored result that is not JSON answers internal rather
// than a broken body.
func TestGetSendsStoredResultAsStored(t *testing.T) {
	h := newHarness(t, func(c *server.Config) { c.Workers = -1 })
	sess := h.anon()
	ctx := context.Background()
	accept := func() string {
		resp, body := h.do("POST", "/v1/process", sess.Token, processBody(acds.OutputFHIRR4))
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("process: %d %s", resp.StatusCode, body)
		}
		return decode[acds.Accepted](t, body).RequestID
	}
	complete := func(result []byte) string {
		id := accept()
		r, err := h.store.Claim(ctx, store.ClaimOptions{Worker: "w", Lease: time.Minute, MaxAttempts: 3, Exhausted: []byte(`{}`), Now: time.Now()})
		if err != nil || r == nil || r.ID != id {
			t.Fatalf("claim: %v %v", r, err)
		}
		if err := h.store.Complete(ctx, id, "w", result, time.Now()); err != nil {
			t.Fatal(err)
		}
		return id
	}

	output := `{"resourceType":"Bundle", "type":"collection","entry":[]}`
	stored := []byte(`{"outputFormat":"fhir_r4","output":` + output + `,"outputDigest":"sha256:00","attestationBundle":"AA=="}`)
	id := complete(stored)
	resp, body := h.do("GET", "/v1/requests/"+id, sess.Token, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("get: %d %s", resp.StatusCode, body)
	}
	rec := decode[acds.Request](t, body)
	if rec.Status != acds.StatusCompleted || rec.Result == nil || rec.RequestID != id {
		t.Fatalf("record: %+v", rec)
	}
	if rec.Result.OutputDigest != "sha256:00" || rec.Result.AttestationBundle != "AA==" {
		t.Fatalf("result: %+v", rec.Result)
	}
	if !bytes.Contains(body, []byte(`"result":`)) || bytes.Count(body, []byte(`"result"`)) != 1 {
		t.Fatalf("want exactly one result member: %s", body)
	}

	id = complete([]byte(`{"outputFormat":`))
	resp, body = h.do("GET", "/v1/requests/"+id, sess.Token, nil)
	wantProblem(t, resp, body, acds.ProblemInternal)
}
