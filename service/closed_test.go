package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/service"
)

// TestHandlerAfterClose: once Close has begun, Handler answers every
// request 503 "this service is closed" without Retry-After (its store is
// closed for good), instead of "the request store is unavailable; retry
// later", or healthy for a moment.
func TestHandlerAfterClose(t *testing.T) {
	svc, err := service.Open(context.Background(), service.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(svc.Handler())
	defer ts.Close()
	get := func(path string) (*http.Response, acds.Problem) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p acds.Problem
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return resp, p
	}
	if resp, _ := get("/v1/health"); resp.StatusCode != 200 {
		t.Fatalf("health before Close: %d", resp.StatusCode)
	}
	if err := svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/health", "/v1/requests/00000000-0000-4000-8000-000000000000"} {
		resp, p := get(path)
		if resp.StatusCode != http.StatusServiceUnavailable || p.Code() != acds.ProblemUnavailable || p.Detail != "this service is closed" {
			t.Errorf("%s after Close: %d %+v", path, resp.StatusCode, p)
		}
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			t.Errorf("%s after Close: Retry-After %q for a service that will not come back", path, ra)
		}
	}
}
