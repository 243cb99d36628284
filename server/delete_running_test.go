package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

// TestDeleteStopsRunningAttempt: deleting a request that a worker is
// processing stops the attempt (its context ends, with the cause saying
// why) and is logged as what it is — no ERROR "ending the request failed;
// it will be re-claimed", and nothing is stored or re-claimed.
func TestDeleteStopsRunningAttempt(t *testing.T) {
	started := make(chan struct{})
	stopped := make(chan error, 1)
	h := newHarness(t, func(c *server.Config) {
		c.Workers = 1
		c.Pipeline = &servertest.Pipeline{Hook: func(ctx context.Context, _ []byte) error {
			close(started)
			select {
			case <-ctx.Done():
				stopped <- context.Cause(ctx)
				return ctx.Err()
			case <-time.After(10 * time.Second):
				stopped <- nil
				return nil
			}
		}}
	})
	s := h.anon()
	resp, b := h.do("POST", "/v1/process", s.Token, processBody("fhir_r4"))
	if resp.StatusCode != 202 {
		t.Fatalf("process: %d %s", resp.StatusCode, b)
	}
	id := decode[acds.Accepted](t, b).RequestID
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the attempt never started")
	}
	if resp, b := h.do("DELETE", "/v1/requests/"+id, s.Token, nil); resp.StatusCode != 204 {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	select {
	case cause := <-stopped:
		if cause == nil || !strings.Contains(cause.Error(), "deleted") {
			t.Fatalf("the attempt ended with cause %v, want the deletion", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the attempt went on after its request was deleted")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(h.logs.String(), "request deleted while processing") {
		if time.Now().After(deadline) {
			t.Fatalf("no log line for the stopped attempt:\n%s", h.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if l := h.logs.String(); strings.Contains(l, `"level":"ERROR"`) || strings.Contains(l, "lease lost") {
		t.Errorf("deleting a running request logged an error:\n%s", l)
	}
	if resp, _ := h.do("GET", "/v1/requests/"+id, s.Token, nil); resp.StatusCode != 404 {
		t.Errorf("GET after delete: %d, want 404", resp.StatusCode)
	}
}

// TestDeleteElsewhereStopsAttempt: a request deleted by another replica
// (here, in the store directly) ends the local attempt through its lost
// lease, which is logged as the deletion it is, not as a takeover.
func TestDeleteElsewhereStopsAttempt(t *testing.T) {
	started := make(chan struct{})
	h := newHarness(t, func(c *server.Config) {
		c.Workers = 1
		c.Lease = 300 * time.Millisecond
		c.Pipeline = &servertest.Pipeline{Hook: func(ctx context.Context, _ []byte) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}}
	})
	s := h.anon()
	resp, b := h.do("POST", "/v1/process", s.Token, processBody("fhir_r4"))
	if resp.StatusCode != 202 {
		t.Fatalf("process: %d %s", resp.StatusCode, b)
	}
	id := decode[acds.Accepted](t, b).RequestID
	<-started
	if err := h.store.DeleteRequest(t.Context(), s.Pseudonym, id); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(h.logs.String(), "request deleted while processing") {
		if time.Now().After(deadline) {
			t.Fatalf("no log line for the stopped attempt:\n%s", h.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if l := h.logs.String(); strings.Contains(l, `"level":"ERROR"`) || strings.Contains(l, "another worker owns") {
		t.Errorf("a request deleted elsewhere was logged as a failure or a takeover:\n%s", l)
	}
}
