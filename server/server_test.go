package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/store"
)

var tokenRE = regexp.MustCompile(`^acds_[A-Za-z0-9_-]{43}$`)

func TestFullProcessFlow(t *testing.T) {
	h := newHarness(t, nil)
	sess := h.anon()
	if !tokenRE.MatchString(sess.Token) {
		t.Fatalf("token %q does not have the acds_ + 43 base64url shape", sess.Token)
	}
	if d := time.Until(sess.ExpiresAt); d < 23*time.Hour || d > 25*time.Hour {
		t.Errorf("expiresAt %v is not ~24 h away", sess.ExpiresAt)
	}

	resp, b := h.do("POST", "/v1/process", sess.Token, `{"data":`+sampleBundle+`,"outputFormat":"fhir_r4"}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("process: %d %s", resp.StatusCode, b)
	}
	acc := decode[acds.Accepted](t, b)
	if acc.Status != acds.StatusProcessing || acc.RequestID == "" {
		t.Fatalf("accepted = %+v", acc)
	}
	if loc := resp.Header.Get("Location"); loc != "/v1/requests/"+acc.RequestID {
		t.Fatalf("Location = %q", loc)
	}
	r := h.wait(sess.Token, acc.RequestID, 5*time.Second)
	if r.Status != acds.StatusCompleted || r.Result == nil || r.CompletedAt == nil || r.Kind != acds.KindProcess {
		t.Fatalf("request = %+v", r)
	}
	sum := sha256.Sum256(r.Result.Output)
	if r.Result.OutputDigest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("outputDigest %s does not match the output bytes", r.Result.OutputDigest)
	}
	if !strings.Contains(string(r.Result.Output), "<div") {
		t.Fatalf("output was HTML-escaped or altered: %s", r.Result.Output)
	}
	bundle, err := base64.StdEncoding.DecodeString(r.Result.AttestationBundle)
	if err != nil {
		t.Fatal(err)
	}
	var fb servertest.FakeBundle
	if err := json.Unmarshal(bundle, &fb); err != nil {
		t.Fatal(err)
	}
	if fb.Claims.RequestID != acc.RequestID || fb.Claims.Source.Kind != acds.SourceRaw || fb.Claims.OutputDigest != r.Result.OutputDigest ||
		!strings.HasPrefix(fb.Claims.Source.InputDigest, "sha256:") {
		t.Fatalf("claims = %+v", fb.Claims)
	}

	// Verify the bundle with and without the output; a changed output is caught.
	resp, b = h.do("POST", "/v1/verify", "", acds.VerifyRequest{AttestationBundle: r.Result.AttestationBundle, Output: r.Result.Output})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("verify: %d %s", resp.StatusCode, b)
	}
	vr := decode[acds.VerifyResponse](t, b)
	if !vr.EnclaveHashMatch || vr.Details.RequestID != acc.RequestID {
		t.Fatalf("verify = %+v", vr)
	}
	resp, b = h.do("POST", "/v1/verify", "", acds.VerifyRequest{AttestationBundle: r.Result.AttestationBundle, Output: json.RawMessage(`{"resourceType":"Bundle"}`)})
	if vr := decode[acds.VerifyResponse](t, b); resp.StatusCode != 200 || vr.EnclaveHashMatch {
		t.Fatalf("verify with another output: %d %+v", resp.StatusCode, vr)
	}

	// List, delete, then it is gone.
	resp, b = h.do("GET", "/v1/requests", sess.Token, nil)
	list := decode[acds.RequestList](t, b)
	if resp.StatusCode != 200 || len(list.Items) != 1 || list.Items[0].RequestID != acc.RequestID || list.NextCursor != "" {
		t.Fatalf("list: %d %s", resp.StatusCode, b)
	}
	resp, b = h.do("DELETE", "/v1/requests/"+acc.RequestID, sess.Token, nil)
	if resp.StatusCode != http.StatusNoContent || len(b) != 0 {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	resp, b = h.do("GET", "/v1/requests/"+acc.RequestID, sess.Token, nil)
	wantProblem(t, resp, b, acds.ProblemNotFound)
	resp, b = h.do("DELETE", "/v1/requests/"+acc.RequestID, sess.Token, nil)
	wantProblem(t, resp, b, acds.ProblemNotFound)
}

func TestHealthAttestationOpenAPI(t *testing.T) {
	clock := servertest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := newHarness(t, func(c *server.Config) { c.Now = clock.Now })
	clock.Advance(3*time.Hour + 7*time.Minute + 59*time.Second)
	resp, b := h.do("GET", "/v1/health", "", nil)
	hl := decode[acds.Health](t, b)
	if resp.StatusCode != 200 || hl != (acds.Health{Status: "healthy", Version: acds.Version, Enclave: servertest.FakeProfile, Uptime: "3h 07m"}) {
		t.Fatalf("health: %d %s", resp.StatusCode, b)
	}
	resp, b = h.do("GET", "/v1/attestation", "", nil)
	at := decode[acds.Attestation](t, b)
	if resp.StatusCode != 200 || at.Profile != servertest.FakeProfile || len(at.SigningKey) == 0 {
		t.Fatalf("attestation: %d %s", resp.StatusCode, b)
	}
	resp, b = h.do("GET", "/v1/openapi.json", "", nil)
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || resp.StatusCode != 200 || doc.OpenAPI != "3.0.3" {
		t.Fatalf("openapi: %d %v %.100s", resp.StatusCode, err, b)
	}

	// Without an enclave: health says none, attestation is unavailable.
	h2 := newHarness(t, func(c *server.Config) { c.Enclave = nil })
	_, b = h2.do("GET", "/v1/health", "", nil)
	if decode[acds.Health](t, b).Enclave != "none" {
		t.Fatalf("health without enclave: %s", b)
	}
	resp, b = h2.do("GET", "/v1/attestation", "", nil)
	wantProblem(t, resp, b, acds.ProblemUnavailable)
}

func TestMountedUnderPrefix(t *testing.T) {
	srv, err := server.New(server.Config{Store: servertest.NewMemStore(), Pipeline: &servertest.Pipeline{}, Enclave: servertest.NewEnclave(), Workers: 1, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", srv.Handler()))
	mux.HandleFunc("/other", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "other") })
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	h := &harness{t: t, ts: ts}

	resp, b := h.do("POST", "/api/v1/auth/anon", "", nil)
	if resp.StatusCode != 201 {
		t.Fatalf("anon under prefix: %d %s", resp.StatusCode, b)
	}
	sess := decode[acds.Session](t, b)
	resp, b = h.do("POST", "/api/v1/process", sess.Token, processBody(acds.OutputFHIRR4Deidentified))
	if resp.StatusCode != 202 {
		t.Fatalf("process under prefix: %d %s", resp.StatusCode, b)
	}
	loc := resp.Header.Get("Location")
	id := decode[acds.Accepted](t, b).RequestID
	if loc != "/api/v1/requests/"+id {
		t.Fatalf("Location = %q, want the prefix kept", loc)
	}
	resp, b = h.do("GET", loc, sess.Token, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET Location: %d %s", resp.StatusCode, b)
	}
	if resp, b = h.do("GET", "/other", "", nil); string(b) != "other" {
		t.Fatalf("parent mux route broken: %d %s", resp.StatusCode, b)
	}
	resp, b = h.do("GET", "/api/v1/nope", "", nil)
	wantProblem(t, resp, b, acds.ProblemNotFound)

	// The OpenAPI document served under the prefix names it as its
	// server, so a client generated from it calls /api/v1/….
	_, b = h.do("GET", "/api/v1/openapi.json", "", nil)
	var doc struct {
		Servers []struct{ URL string } `json:"servers"`
		Paths   map[string]any         `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Servers) != 1 || doc.Servers[0].URL != "/api" || doc.Paths["/v1/process"] == nil {
		t.Fatalf("OpenAPI under /api: servers %+v (%v)", doc.Servers, err)
	}
}

// TestOpenAPIServerAtRoot: at the root the document's server is "/", the
// entry handleOpenAPI rewrites under a prefix (exactly one).
func TestOpenAPIServerAtRoot(t *testing.T) {
	doc := server.OpenAPIDocument()
	if n := bytes.Count(doc, []byte(`"url": "/"`)); n != 1 {
		t.Fatalf("the document has %d root server entries, want 1", n)
	}
	h := newHarness(t, nil)
	if _, b := h.do("GET", "/v1/openapi.json", "", nil); !bytes.Equal(b, doc) {
		t.Fatal("at the root the served document differs from OpenAPIDocument")
	}
}

func TestOwnerIsolationAndPagination(t *testing.T) {
	t.Run("memstore", func(t *testing.T) { testOwnerIsolationAndPagination(t, servertest.NewMemStore()) })
	t.Run("sqlite", func(t *testing.T) {
		st := openSQLite(t, filepath.Join(t.TempDir(), "acds.db"))
		t.Cleanup(func() { _ = st.Close() })
		testOwnerIsolationAndPagination(t, st)
	})
}

func testOwnerIsolationAndPagination(t *testing.T, st store.Store) {
	h := newHarness(t, func(c *server.Config) { c.Workers, c.Store = -1, st }) // accept only
	alice, bob := h.anon(), h.anon()
	var ids []string
	for range 5 {
		resp, b := h.do("POST", "/v1/process", alice.Token, processBody(acds.OutputFHIRR4))
		if resp.StatusCode != 202 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		ids = append(ids, decode[acds.Accepted](t, b).RequestID)
		time.Sleep(2 * time.Millisecond)
	}
	// Bob sees none of Alice's requests.
	resp, b := h.do("GET", "/v1/requests/"+ids[0], bob.Token, nil)
	wantProblem(t, resp, b, acds.ProblemNotFound)
	resp, b = h.do("DELETE", "/v1/requests/"+ids[0], bob.Token, nil)
	wantProblem(t, resp, b, acds.ProblemNotFound)
	_, b = h.do("GET", "/v1/requests", bob.Token, nil)
	if l := decode[acds.RequestList](t, b); len(l.Items) != 0 {
		t.Fatalf("bob lists %d items", len(l.Items))
	}
	// Alice pages through hers newest first, two at a time.
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		path := "/v1/requests?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		resp, b := h.do("GET", path, alice.Token, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("page %d: %d %s", page, resp.StatusCode, b)
		}
		l := decode[acds.RequestList](t, b)
		for _, it := range l.Items {
			got = append(got, it.RequestID)
		}
		if cursor = l.NextCursor; cursor == "" || page > 5 {
			break
		}
	}
	want := slices.Clone(ids)
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Fatalf("pages = %v, want %v", got, want)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "page=2", "cursor=%21%21notacursor"} {
		resp, b := h.do("GET", "/v1/requests?"+q, alice.Token, nil)
		p := wantProblem(t, resp, b, acds.ProblemInvalidRequest)
		if len(p.Errors) != 1 {
			t.Errorf("%s: errors = %+v", q, p.Errors)
		}
	}
}

func TestRecover(t *testing.T) {
	h := newHarness(t, nil)
	const pass = "correct horse battery"
	resp, b := h.do("POST", "/v1/auth/anon", "", acds.AnonRequest{Passphrase: "short"})
	p := wantProblem(t, resp, b, acds.ProblemInvalidRequest)
	if p.Errors[0].Field != "passphrase" {
		t.Fatalf("errors = %+v", p.Errors)
	}
	resp, b = h.do("POST", "/v1/auth/anon", "", acds.AnonRequest{Passphrase: pass})
	if resp.StatusCode != 201 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	s1 := decode[acds.Session](t, b)
	resp, b = h.do("POST", "/v1/process", s1.Token, processBody(acds.OutputFHIRR4))
	id := decode[acds.Accepted](t, b).RequestID

	resp, b = h.do("POST", "/v1/auth/recover", "", acds.RecoverRequest{Pseudonym: s1.Pseudonym, Passphrase: pass})
	if resp.StatusCode != 200 {
		t.Fatalf("recover: %d %s", resp.StatusCode, b)
	}
	s2 := decode[acds.Session](t, b)
	if s2.Pseudonym != s1.Pseudonym || s2.Token == s1.Token || !tokenRE.MatchString(s2.Token) {
		t.Fatalf("recovered session = %+v", s2)
	}
	if resp, b = h.do("GET", "/v1/requests/"+id, s2.Token, nil); resp.StatusCode != 200 {
		t.Fatalf("recovered token cannot see the request: %d %s", resp.StatusCode, b)
	}
	// Both tokens stay valid.
	if resp, _ = h.do("GET", "/v1/requests/"+id, s1.Token, nil); resp.StatusCode != 200 {
		t.Fatalf("old token: %d", resp.StatusCode)
	}
	noPass := h.anon()
	for name, rr := range map[string]acds.RecoverRequest{
		"wrong passphrase":    {Pseudonym: s1.Pseudonym, Passphrase: pass + "!"},
		"unknown pseudonym":   {Pseudonym: "anon_aaaaaaaaaaaaaaaaaaaaaaaaaa", Passphrase: pass},
		"malformed pseudonym": {Pseudonym: "x", Passphrase: pass},
		"no passphrase set":   {Pseudonym: noPass.Pseudonym, Passphrase: pass},
	} {
		resp, b := h.do("POST", "/v1/auth/recover", "", rr)
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %s", name, resp.StatusCode, b)
		}
		wantProblem(t, resp, b, acds.ProblemUnauthorized)
	}
}

func TestTokenExpiry(t *testing.T) {
	clock := servertest.NewClock(time.Now())
	h := newHarness(t, func(c *server.Config) { c.Now = clock.Now; c.TokenLifetime = time.Hour })
	s := h.anon()
	if resp, b := h.do("GET", "/v1/requests", s.Token, nil); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	clock.Advance(time.Hour)
	resp, b := h.do("GET", "/v1/requests", s.Token, nil)
	wantProblem(t, resp, b, acds.ProblemUnauthorized)
	if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("WWW-Authenticate = %q", resp.Header.Get("WWW-Authenticate"))
	}
}

// A worker that dies mid-request (here: its server is closed without
// draining) leaves the lease to expire; another server sharing the store
// re-claims and completes the request, on its second attempt.
func TestWorkerDeathLeaseExpiryReclaim(t *testing.T) {
	st := servertest.NewMemStore()
	claimed := make(chan struct{})
	var once atomic.Bool
	blocking := &servertest.Pipeline{Hook: func(ctx context.Context, _ []byte) error {
		if once.CompareAndSwap(false, true) {
			close(claimed)
		}
		<-ctx.Done()
		return ctx.Err()
	}}
	lease := 300 * time.Millisecond
	a := newHarness(t, func(c *server.Config) {
		c.Store, c.Pipeline, c.Lease, c.Workers = st, blocking, lease, 1
	})
	s := a.anon()
	_, b := a.do("POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4))
	id := decode[acds.Accepted](t, b).RequestID
	select {
	case <-claimed:
	case <-time.After(5 * time.Second):
		t.Fatal("server A never claimed the request")
	}
	// Kill A's workers: close with an already-ended context.
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.srv.Close(dead); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v, want context.Canceled (work abandoned)", err)
	}
	resp, b := a.do("GET", "/v1/requests/"+id, s.Token, nil)
	if r := decode[acds.Request](t, b); resp.StatusCode != 200 || r.Status != acds.StatusProcessing {
		t.Fatalf("after the worker died: %d %s", resp.StatusCode, b)
	}
	start := time.Now()
	bsrv := newHarness(t, func(c *server.Config) { c.Store, c.Lease = st, lease })
	r := bsrv.wait(s.Token, id, 5*time.Second)
	if r.Status != acds.StatusCompleted {
		t.Fatalf("re-claimed request = %+v", r)
	}
	if time.Since(start) > 4*lease+5*time.Second {
		t.Errorf("re-claim took %v", time.Since(start))
	}
	for _, row := range st.Snapshot() {
		if row.ID == id && row.Attempts != 2 {
			t.Fatalf("attempts = %d, want 2", row.Attempts)
		}
	}
}

// A request whose every attempt dies (the worker panics) is retried once,
// alone, and then failed with a problem that says processing could not
// complete, never left processing.
func TestDyingAttemptsFail(t *testing.T) {
	var calls atomic.Int32
	h := newHarness(t, func(c *server.Config) {
		c.Lease, c.PollInterval = 100*time.Millisecond, 20*time.Millisecond
		c.Pipeline = &servertest.Pipeline{Hook: func(context.Context, []byte) error {
			calls.Add(1)
			panic("simulated worker crash")
		}}
	})
	s := h.anon()
	_, b := h.do("POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4))
	id := decode[acds.Accepted](t, b).RequestID
	r := h.wait(s.Token, id, 10*time.Second)
	if r.Status != acds.StatusFailed || r.Error == nil || r.Error.Code() != acds.ProblemInternal ||
		!strings.Contains(r.Error.Detail, "processing could not complete") || r.CompletedAt == nil {
		t.Fatalf("request = %+v, error %+v", r, r.Error)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("pipeline ran %d times, want 2 (the attempt and one retry alone)", n)
	}
}

func TestFetchAndAttest(t *testing.T) {
	fetcher := &servertest.Fetcher{FHIR: []byte(sampleBundle)}
	h := newHarness(t, func(c *server.Config) { c.Fetcher = fetcher })
	s := h.anon()
	body := acds.FetchAndAttestRequest{
		SystemType: acds.SystemDemo, PortalURL: "https://portal.example/fhir", RecordID: "p1",
		Username: "alice", Password: "pa55-w0rd-unique", OutputFormat: acds.OutputFHIRR4,
	}
	resp, b := h.do("POST", "/v1/fetch-and-attest", s.Token, body)
	if resp.StatusCode != 202 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	acc := decode[acds.Accepted](t, b)
	if acc.Message == "" || resp.Header.Get("Location") != "/v1/requests/"+acc.RequestID {
		t.Fatalf("accepted = %+v, Location %q", acc, resp.Header.Get("Location"))
	}
	r := h.wait(s.Token, acc.RequestID, 5*time.Second)
	if r.Status != acds.StatusCompleted || r.Kind != acds.KindFetchAndAttest {
		t.Fatalf("request = %+v (error %+v)", r, r.Error)
	}
	if got := fetcher.LastCredentials(); got != (portal.Credentials{Username: body.Username, Password: body.Password}) {
		t.Fatalf("fetcher got credentials %+v", got)
	}
	for _, row := range h.store.(*servertest.MemStore).Snapshot() {
		if len(row.Sealed) != 0 {
			t.Fatalf("sealed credentials not erased after the fetch")
		}
		if strings.Contains(string(row.Input), body.Password) {
			t.Fatalf("password stored in the input")
		}
	}
}

// Credentials queued longer than CredentialTTL are erased; the request then
// fails with a problem that says so, and the fetcher never sees them.
func TestExpiredCredentialsAreErased(t *testing.T) {
	clock := servertest.NewClock(time.Now())
	st := servertest.NewMemStore()
	fetcher := &servertest.Fetcher{FHIR: []byte(sampleBundle)}
	a := newHarness(t, func(c *server.Config) { c.Store, c.Now, c.Fetcher, c.Workers = st, clock.Now, fetcher, -1 })
	s := a.anon()
	_, b := a.do("POST", "/v1/fetch-and-attest", s.Token, acds.FetchAndAttestRequest{
		SystemType: acds.SystemDemo, PortalURL: "https://portal.example/", RecordID: "1",
		Username: "u", Password: "p", OutputFormat: acds.OutputFHIRR4,
	})
	id := decode[acds.Accepted](t, b).RequestID
	if rows := st.Snapshot(); len(rows) != 1 || len(rows[0].Sealed) == 0 {
		t.Fatalf("credentials not sealed in the queue")
	}
	clock.Advance(server.DefaultCredentialTTL + time.Minute)
	bsrv := newHarness(t, func(c *server.Config) { c.Store, c.Now, c.Fetcher = st, clock.Now, fetcher })
	r := bsrv.wait(s.Token, id, 5*time.Second)
	if r.Status != acds.StatusFailed || r.Error.Code() != acds.ProblemUnavailable || !strings.Contains(r.Error.Detail, "no longer available") {
		t.Fatalf("request = %+v %+v", r, r.Error)
	}
	if got := fetcher.LastCredentials(); got != (portal.Credentials{}) {
		t.Fatalf("the fetcher saw expired credentials")
	}
}

// Without a Fetcher (or another part a fetch needs) a fetch-and-attest
// request is bound to fail: it is refused with 503 unavailable, nothing
// is stored and no credential is kept. (It used to be accepted with 202
// and failed later.)
func TestFetchWithoutFetcherRefusedUnavailable(t *testing.T) {
	for name, mod := range map[string]func(*server.Config){
		"no fetcher":  nil,
		"no enclave":  func(c *server.Config) { c.Fetcher, c.Enclave = &servertest.Fetcher{}, nil },
		"no pipeline": func(c *server.Config) { c.Fetcher, c.Pipeline = &servertest.Fetcher{}, nil },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, mod)
			s := h.anon()
			resp, b := h.do("POST", "/v1/fetch-and-attest", s.Token, acds.FetchAndAttestRequest{
				SystemType: acds.SystemFHIRBasic, PortalURL: "https://portal.example/", RecordID: "1",
				Username: "u", Password: "p",
			})
			p := wantProblem(t, resp, b, acds.ProblemUnavailable)
			if !strings.Contains(p.Detail, "not configured") {
				t.Errorf("detail %q does not say what is missing", p.Detail)
			}
			if rows := h.store.(*servertest.MemStore).Snapshot(); len(rows) != 0 {
				t.Fatalf("%d requests stored although none can be fetched", len(rows))
			}
		})
	}
}

// The Fetcher's Admit decides acceptance: its refusals are answered at
// once, with the problem it classifies and the field it names, and
// nothing is stored; what it admits is accepted. The real rules (package
// portal's guard and recordId syntax) are tested through package service.
func TestFetchAdmission(t *testing.T) {
	var seen []portal.Request
	fetcher := &servertest.Fetcher{FHIR: []byte(sampleBundle), AdmitFunc: func(r portal.Request) error {
		seen = append(seen, r)
		switch {
		case strings.Contains(r.PortalURL, "refused.example"):
			return fmt.Errorf("test rule for alice-77: %w", portal.ErrForbidden)
		case r.RecordID == "x_y":
			return portal.CheckRecordID(r.RecordID)
		case r.RecordID == "boom":
			return errors.New("admission exploded")
		}
		return nil
	}}
	h := newHarness(t, func(c *server.Config) { c.Fetcher = fetcher })
	s := h.anon()
	body := func(portalURL, recordID string) acds.FetchAndAttestRequest {
		return acds.FetchAndAttestRequest{SystemType: acds.SystemFHIRBasic, PortalURL: portalURL, RecordID: recordID,
			Username: "alice-77", Password: "hunter2-xyz"}
	}
	for _, tc := range []struct {
		name, portalURL, recordID string
		code, field               string
	}{
		{"forbidden portal", "https://refused.example/fhir", "1", acds.ProblemForbiddenPortal, "portalUrl"},
		{"bad record id", "https://portal.example/fhir", "x_y", acds.ProblemInvalidRequest, "recordId"},
		{"admission fails", "https://portal.example/fhir", "boom", acds.ProblemInternal, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := h.do("POST", "/v1/fetch-and-attest", s.Token, body(tc.portalURL, tc.recordID))
			p := wantProblem(t, resp, b, tc.code)
			if tc.field != "" && (len(p.Errors) != 1 || p.Errors[0].Field != tc.field) {
				t.Errorf("errors %+v, want one naming %s", p.Errors, tc.field)
			}
			if strings.Contains(string(b), "alice-77") || strings.Contains(string(b), "hunter2-xyz") || strings.Contains(string(b), "exploded") {
				t.Errorf("answer leaks: %s", b)
			}
		})
	}
	if rows := h.store.(*servertest.MemStore).Snapshot(); len(rows) != 0 {
		t.Fatalf("%d refused requests stored", len(rows))
	}
	resp, b := h.do("POST", "/v1/fetch-and-attest", s.Token, body("https://portal.example/fhir", "pat-1"))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("admitted request: %d %s", resp.StatusCode, b)
	}
	last := seen[len(seen)-1]
	if last.PortalURL != "https://portal.example/fhir" || last.RecordID != "pat-1" || last.SystemType != acds.SystemFHIRBasic ||
		last.Credentials != (portal.Credentials{Username: "alice-77", Password: "hunter2-xyz"}) {
		t.Fatalf("Admit saw %+v", last)
	}
	if r := h.wait(s.Token, decode[acds.Accepted](t, b).RequestID, 5*time.Second); r.Status != acds.StatusCompleted {
		t.Fatalf("admitted request ended %+v %+v", r, r.Error)
	}
}

// TestMissingSeamsRefusedAtOnce: a server without a pipeline or an
// enclave refuses POST /v1/process with 503 unavailable naming what is
// missing, instead of accepting a request bound to fail; nothing is stored.
func TestMissingSeamsRefusedAtOnce(t *testing.T) {
	h := newHarness(t, func(c *server.Config) { c.Pipeline, c.Enclave = nil, nil })
	s := h.anon()
	resp, b := h.do("POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4))
	p := decode[acds.Problem](t, b)
	if resp.StatusCode != http.StatusServiceUnavailable || p.Code() != acds.ProblemUnavailable ||
		!strings.Contains(p.Detail, "FHIR processing") || !strings.Contains(p.Detail, "enclave") {
		t.Fatalf("process without pipeline and enclave: %d %s", resp.StatusCode, b)
	}
	if rows := h.store.(*servertest.MemStore).Snapshot(); len(rows) != 0 {
		t.Fatalf("%d requests stored", len(rows))
	}
}

func TestInvalidFHIRDuringProcessingFailsTheRequest(t *testing.T) {
	// A pipeline without Check: the request is accepted and fails with invalid-fhir.
	h := newHarness(t, func(c *server.Config) { c.Pipeline = processOnly{&servertest.Pipeline{}} })
	s := h.anon()
	resp, b := h.do("POST", "/v1/process", s.Token, map[string]any{"data": map[string]any{"type": "collection"}, "outputFormat": "fhir_r4"})
	if resp.StatusCode != 202 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	r := h.wait(s.Token, decode[acds.Accepted](t, b).RequestID, 5*time.Second)
	if r.Status != acds.StatusFailed || r.Error.Code() != acds.ProblemInvalidFHIR || len(r.Error.OperationOutcome) == 0 {
		t.Fatalf("request = %+v, error %+v", r, r.Error)
	}
}

type processOnly struct{ p server.Pipeline }

func (p processOnly) Process(ctx context.Context, in []byte, o fhir.Options) (*fhir.Output, error) {
	return p.p.Process(ctx, in, o)
}

func TestCloseDrainsInFlight(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	h := newHarness(t, func(c *server.Config) {
		c.Pipeline = &servertest.Pipeline{Hook: func(ctx context.Context, _ []byte) error {
			started <- struct{}{}
			<-release
			return nil
		}}
	})
	s := h.anon()
	_, b := h.do("POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4))
	id := decode[acds.Accepted](t, b).RequestID
	<-started
	done := make(chan error)
	go func() { done <- h.srv.Close(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Close returned %v before the in-flight request finished", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, b = h.do("GET", "/v1/requests/"+id, s.Token, nil)
	if r := decode[acds.Request](t, b); r.Status != acds.StatusCompleted {
		t.Fatalf("drained request = %+v", r)
	}
}

func TestNewRequiresStore(t *testing.T) {
	if _, err := server.New(server.Config{}); err == nil {
		t.Fatal("New without a Store succeeded")
	}
}

func ExampleServer() {
	srv, err := server.New(server.Config{
		Store:    servertest.NewMemStore(), // real servers use service.OpenStore
		Pipeline: &servertest.Pipeline{},
		Enclave:  servertest.NewEnclave(),
	})
	if err != nil {
		panic(err)
	}
	defer srv.Close(context.Background())

	mux := http.NewServeMux()
	mux.Handle("/acds/", http.StripPrefix("/acds", srv.Handler()))
	ts := httptest.NewServer(mux)
	defer ts.Close()

	resp, err := http.Get(ts.URL + "/acds/v1/health")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var h acds.Health
	_ = json.NewDecoder(resp.Body).Decode(&h)
	fmt.Println(resp.StatusCode, h.Status, h.Version)
	// Output: 200 healthy 0.1.0
}

type panickyVerifier struct{}

func (panickyVerifier) Verify(context.Context, []byte, []byte) (*acds.VerifyResponse, error) {
	panic("verifier bug")
}

// A panic in a handler's dependency is a 500 internal problem, not a
// dropped connection, and does not take the server down.
func TestHandlerPanicIsInternalProblem(t *testing.T) {
	h := newHarness(t, func(c *server.Config) { c.Verifier = panickyVerifier{} })
	resp, b := h.do("POST", "/v1/verify", "", `{"attestationBundle":"aGVsbG8="}`)
	p := wantProblem(t, resp, b, acds.ProblemInternal)
	if strings.Contains(p.Detail, "verifier bug") {
		t.Errorf("panic value leaked: %q", p.Detail)
	}
	if resp, _ := h.do("GET", "/v1/health", "", nil); resp.StatusCode != 200 {
		t.Fatalf("server down after a panic: %d", resp.StatusCode)
	}
}

// A Fetcher's typed failure becomes the request's problem, with its code
// and status, and without the credentials.
func TestFetchErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
	}{
		{&portal.Error{Kind: portal.ErrAuthFailed, Detail: "portal said no to alice-77 / hunter2-xyz"}, acds.ProblemPortalAuthFailed},
		{fmt.Errorf("wrapped: %w", &portal.Error{Kind: portal.ErrRecordNotFound, Detail: "no Patient/1"}), acds.ProblemRecordNotFound},
		{fmt.Errorf("guard: %w", portal.ErrForbidden), acds.ProblemForbiddenPortal},
		{&portal.Error{Kind: portal.ErrUnsupported, Detail: "grant_types_supported lacks password"}, acds.ProblemPortalUnsupported},
		{errors.New("connection reset"), acds.ProblemPortalUnavailable},
	} {
		h := newHarness(t, func(c *server.Config) { c.Fetcher = &servertest.Fetcher{Err: tc.err} })
		s := h.anon()
		_, b := h.do("POST", "/v1/fetch-and-attest", s.Token, acds.FetchAndAttestRequest{
			SystemType: acds.SystemFHIRBasic, PortalURL: "https://portal.example/", RecordID: "1",
			Username: "alice-77", Password: "hunter2-xyz", OutputFormat: acds.OutputFHIRR4,
		})
		r := h.wait(s.Token, decode[acds.Accepted](t, b).RequestID, 5*time.Second)
		if r.Status != acds.StatusFailed || r.Error.Code() != tc.code || r.Error.Status != acds.ProblemStatus(tc.code) {
			t.Fatalf("%v: request = %+v %+v", tc.err, r, r.Error)
		}
		if strings.Contains(r.Error.Detail, "alice-77") || strings.Contains(r.Error.Detail, "hunter2-xyz") {
			t.Fatalf("credentials in the problem: %q", r.Error.Detail)
		}
	}
}

// TestProcessWithoutContentType: SPEC §4.3 names no Content-Type for
// POST /v1/process, so a client written from it may send none; its body
// is read as JSON. A declared non-JSON type is still refused.
func TestProcessWithoutContentType(t *testing.T) {
	h := newHarness(t, nil)
	s := h.anon()
	resp, b := h.do("POST", "/v1/process", s.Token, `{"data":`+sampleBundle+`,"outputFormat":"fhir_r4"}`, "Content-Type", "")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("process without Content-Type: %d %s", resp.StatusCode, b)
	}
	resp, b = h.do("POST", "/v1/process", s.Token, `{"data":`+sampleBundle+`,"outputFormat":"fhir_r4"}`, "Content-Type", "application/fhir+json; charset=utf-8")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("process as application/fhir+json: %d %s", resp.StatusCode, b)
	}
	resp, b = h.do("POST", "/v1/process", s.Token, `{"data":`+sampleBundle+`,"outputFormat":"fhir_r4"}`, "Content-Type", "text/plain")
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("process as text/plain: %d %s", resp.StatusCode, b)
	}
}

// oldChecker has the Checker method of before the format was passed.
type oldChecker struct{ *servertest.Pipeline }

func (oldChecker) Check(context.Context, []byte) error { return nil }

// TestNewRefusesOldChecker: a Pipeline with the earlier Check(ctx, input)
// is refused by New with a message saying why, instead of silently losing
// its check at acceptance.
func TestNewRefusesOldChecker(t *testing.T) {
	_, err := server.New(server.Config{Store: servertest.NewMemStore(), Pipeline: oldChecker{&servertest.Pipeline{}}, Workers: -1})
	if err == nil || !strings.Contains(err.Error(), "Check(ctx, input, format)") {
		t.Fatalf("New = %v", err)
	}
}

// TestRequestIDsAreTimeOrdered: request ids are UUIDs of version 7, so
// that ids made one after the other sort together (newRequestID, which
// fetch-and-attest uses too).
func TestRequestIDsAreTimeOrdered(t *testing.T) {
	h := newHarness(t, nil)
	s := h.anon()
	var last uuid.UUID
	for i := range 3 {
		resp, b := h.do("POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4))
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("process: %d %s", resp.StatusCode, b)
		}
		id, err := uuid.Parse(decode[acds.Accepted](t, b).RequestID)
		if err != nil || id.Version() != 7 {
			t.Fatalf("request id %v (version %d): want a UUID of version 7", id, id.Version())
		}
		if i > 0 && id.String() <= last.String() {
			t.Fatalf("request id %s made after %s sorts before it", id, last)
		}
		last = id
	}
}
