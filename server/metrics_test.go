package server_test

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

// scrape reads GET /metrics and parses the Prometheus text format.
func scrape(t *testing.T, h *harness) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	resp, body := h.do("GET", "/metrics", "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET /metrics Content-Type %q, want the text format", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, body)
	}
	return fams, string(body)
}

// value returns the value of the sample of family name whose labels
// include want, and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsCountWhatHappened drives requests of every kind through the
// server and checks that /metrics counts them by route pattern and status,
// times them, counts the requests the workers ended and the fetches by
// systemType and outcome — and that no token, pseudonym, request id,
// portal host, record id or credential appears anywhere in the scrape.
func TestMetricsCountWhatHappened(t *testing.T) {
	fetcher := &servertest.Fetcher{FHIR: []byte(`{"resourceType":"Bundle","type":"collection"}`)}
	h := newHarness(t, func(c *server.Config) { c.Fetcher = fetcher })
	s := h.anon()

	resp, b := h.do("POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("process: %d %s", resp.StatusCode, b)
	}
	processID := decode[acds.Accepted](t, b).RequestID
	h.wait(s.Token, processID, 10*time.Second)

	fetch := acds.FetchAndAttestRequest{SystemType: "demo", PortalURL: "https://secret-portal.example/fhir",
		RecordID: "rec-778899", Username: "alice-user", Password: "hunter2-password"}
	resp, b = h.do("POST", "/v1/fetch-and-attest", s.Token, fetch)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("fetch: %d %s", resp.StatusCode, b)
	}
	fetchID := decode[acds.Accepted](t, b).RequestID
	h.wait(s.Token, fetchID, 10*time.Second)

	fetcher.Err = &portal.Error{Kind: portal.ErrAuthFailed, Detail: "bad password"}
	resp, b = h.do("POST", "/v1/fetch-and-attest", s.Token, fetch)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("fetch: %d %s", resp.StatusCode, b)
	}
	failedID := decode[acds.Accepted](t, b).RequestID
	h.wait(s.Token, failedID, 10*time.Second)

	h.do("GET", "/v1/requests/00000000-0000-4000-8000-000000000000", s.Token, nil) // 404
	h.do("GET", "/v1/requests/"+processID, "acds_not-a-token", nil)                // 401
	h.do("GET", "/no/such/"+processID, "", nil)                                    // 404, no route

	// A worker counts an ended request after its store write, which a
	// waiting GET may see first: scrape until the last one is counted.
	var fams map[string]*dto.MetricFamily
	var text string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		fams, text = scrape(t, h)
		busy, _ := value(fams, "acds_workers_busy", nil)
		failed, _ := value(fams, "acds_requests_ended_total", map[string]string{"status": acds.StatusFailed})
		if (busy == 0 && failed == 1) || time.Now().After(deadline) {
			break
		}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"acds_http_requests_total", map[string]string{"endpoint": "/v1/process", "method": "POST", "code": "202"}, 1},
		{"acds_http_requests_total", map[string]string{"endpoint": "/v1/fetch-and-attest", "method": "POST", "code": "202"}, 2},
		{"acds_http_requests_total", map[string]string{"endpoint": "/v1/auth/anon", "method": "POST", "code": "201"}, 1},
		{"acds_http_requests_total", map[string]string{"endpoint": "/v1/requests/{id}", "method": "GET", "code": "404"}, 1},
		{"acds_http_requests_total", map[string]string{"endpoint": "/v1/requests/{id}", "method": "GET", "code": "401"}, 1},
		{"acds_http_requests_total", map[string]string{"endpoint": "other", "method": "GET", "code": "404"}, 1},
		{"acds_http_request_duration_seconds", map[string]string{"endpoint": "/v1/process", "method": "POST"}, 1},
		{"acds_requests_ended_total", map[string]string{"kind": acds.KindProcess, "status": acds.StatusCompleted, "problem": ""}, 1},
		{"acds_requests_ended_total", map[string]string{"kind": acds.KindFetchAndAttest, "status": acds.StatusCompleted, "problem": ""}, 1},
		{"acds_requests_ended_total", map[string]string{"kind": acds.KindFetchAndAttest, "status": acds.StatusFailed, "problem": acds.ProblemPortalAuthFailed}, 1},
		{"acds_fetch_outcomes_total", map[string]string{"system_type": "demo", "outcome": "ok"}, 1},
		{"acds_fetch_outcomes_total", map[string]string{"system_type": "demo", "outcome": acds.ProblemPortalAuthFailed}, 1},
		{"acds_notary_sessions_total", nil, 1},
		{"acds_attempt_duration_seconds", map[string]string{"kind": acds.KindFetchAndAttest}, 2},
		{"acds_workers", nil, 2},
		{"acds_workers_busy", nil, 0},
		{"acds_enclave_up", nil, 1},
		{"acds_fetcher_up", nil, 1},
	} {
		got, ok := value(fams, c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("the default registry lacks the Go runtime collector")
	}
	for _, secret := range []string{s.Token, s.Pseudonym, processID, fetchID, failedID, "secret-portal", "rec-778899", "alice-user", "hunter2", "bad password"} {
		if strings.Contains(text, secret) {
			t.Errorf("/metrics contains %q", secret)
		}
	}
}

// TestMetricsQueue checks the queue gauges against a real store: requests
// accepted while no worker runs are counted, with the age of the oldest.
func TestMetricsQueue(t *testing.T) {
	clock := servertest.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	st := openSQLite(t, filepath.Join(t.TempDir(), "acds.db"))
	t.Cleanup(func() { _ = st.Close() })
	h := newHarness(t, func(c *server.Config) { c.Store = st; c.Workers = -1; c.Now = clock.Now })
	s := h.anon()
	fams, _ := scrape(t, h)
	if got, ok := value(fams, "acds_queue_depth", nil); !ok || got != 0 {
		t.Errorf("empty queue: acds_queue_depth = %v (present %v)", got, ok)
	}
	for range 3 {
		if resp, b := h.do("POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4)); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("process: %d %s", resp.StatusCode, b)
		}
	}
	clock.Advance(90 * time.Second)
	fams, _ = scrape(t, h)
	if got, ok := value(fams, "acds_queue_depth", nil); !ok || got != 3 {
		t.Errorf("acds_queue_depth = %v (present %v), want 3", got, ok)
	}
	if got, ok := value(fams, "acds_queue_oldest_age_seconds", nil); !ok || got < 90 || got > 91 {
		t.Errorf("acds_queue_oldest_age_seconds = %v (present %v), want 90", got, ok)
	}
	if got, ok := value(fams, "acds_workers", nil); !ok || got != 0 {
		t.Errorf("acds_workers = %v, want 0 (accept-only server)", got)
	}
}

// TestMetricsEndpointCanBeOff: NoMetricsEndpoint leaves /metrics unrouted
// while an embedder's own registry still gets the collectors.
func TestMetricsEndpointCanBeOff(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, func(c *server.Config) { c.NoMetricsEndpoint = true; c.Metrics = reg })
	resp, b := h.do("GET", "/metrics", "", nil)
	wantProblem(t, resp, b, acds.ProblemNotFound)
	h.anon()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range fams {
		found = found || f.GetName() == "acds_http_requests_total"
	}
	if !found {
		t.Error("the embedder's registry lacks acds_http_requests_total")
	}
}

// TestCloseUnregistersMetrics: a closed Server's collectors leave the
// registry, so that the next Server registers on it (an embedder that
// restarts the server, or a test suite) instead of failing with a
// duplicate registration.
func TestCloseUnregistersMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	for i := range 3 {
		s, err := server.New(server.Config{Store: servertest.NewMemStore(), Workers: -1, Metrics: reg})
		if err != nil {
			t.Fatalf("server %d on the registry: %v", i, err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if mfs, err := reg.Gather(); err != nil || len(mfs) != 0 {
			t.Fatalf("after Close the registry still gathers %d families (%v)", len(mfs), err)
		}
	}
}
