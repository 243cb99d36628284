package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/store"
)

// exchange is one recorded request and response.
type exchange struct {
	req      *http.Request
	reqBody  []byte
	status   int
	header   http.Header
	respBody []byte
}

// recorder wraps a handler and records every exchange.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	log  []exchange
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	rc.next.ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
	rc.mu.Lock()
	rc.log = append(rc.log, exchange{req: r.Clone(context.Background()), reqBody: body, status: rec.Code, header: rec.Header().Clone(), respBody: rec.Body.Bytes()})
	rc.mu.Unlock()
}

// TestOpenAPIMatchesRealTraffic loads the served OpenAPI document with
// kin-openapi and validates every request and response of a session that
// calls every endpoint, successes and errors alike. Requests the server
// refused as malformed must be refused by the document too.
// downableStore fails the calls of a store that is down while down is set.
type downableStore struct {
	*servertest.MemStore
	down atomic.Bool
}

var errStoreDown = errors.New("the database does not answer")

func (d *downableStore) SessionByTokenHash(ctx context.Context, h []byte) (store.Session, error) {
	if d.down.Load() {
		return store.Session{}, errStoreDown
	}
	return d.MemStore.SessionByTokenHash(ctx, h)
}

func (d *downableStore) ListRequests(ctx context.Context, owner string, p store.Page) ([]store.Request, string, error) {
	if d.down.Load() {
		return nil, "", errStoreDown
	}
	return d.MemStore.ListRequests(ctx, owner, p)
}

func TestOpenAPIMatchesRealTraffic(t *testing.T) {
	st := &downableStore{MemStore: servertest.NewMemStore()}
	h := newHarness(t, func(c *server.Config) {
		c.Store = st
		c.Fetcher = &servertest.Fetcher{
			Err: &portal.Error{Kind: portal.ErrUnavailable, Detail: "the test portal is down"},
			AdmitFunc: func(r portal.Request) error {
				if strings.Contains(r.PortalURL, "10.0.0.1") {
					return fmt.Errorf("private address: %w", portal.ErrForbidden)
				}
				return nil
			},
		}
	})
	rc := &recorder{next: h.srv.Handler()}
	h.ts.Config.Handler = rc

	// Drive every endpoint.
	_, docBytes := h.do("GET", "/v1/openapi.json", "", nil)
	h.do("GET", "/v1/health", "", nil)
	h.do("GET", "/v1/attestation", "", nil)
	_, b := h.do("POST", "/v1/auth/anon", "", acds.AnonRequest{Passphrase: "twelve chars or more"})
	s := decode[acds.Session](t, b)
	h.do("POST", "/v1/auth/anon", "", nil)
	h.do("POST", "/v1/auth/recover", "", acds.RecoverRequest{Pseudonym: s.Pseudonym, Passphrase: "twelve chars or more"})
	h.do("POST", "/v1/auth/recover", "", acds.RecoverRequest{Pseudonym: s.Pseudonym, Passphrase: "wrong passphrase!"})
	_, b = h.do("POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4))
	id := decode[acds.Accepted](t, b).RequestID
	r := h.wait(s.Token, id, 5*time.Second)
	h.do("POST", "/v1/fetch-and-attest", s.Token, acds.FetchAndAttestRequest{SystemType: "demo", PortalURL: "https://portal.example", RecordID: "1",
		Username: "u", Password: "p", OutputFormat: acds.OutputFHIRR4})
	_, b = h.do("GET", "/v1/requests?limit=1", s.Token, nil)
	if next := decode[acds.RequestList](t, b).NextCursor; next != "" {
		h.do("GET", "/v1/requests?limit=1&cursor="+next, s.Token, nil)
	}
	// wait for the failed fetch (the portal is down) so a failed record is validated too
	for _, it := range decode[acds.RequestList](t, b).Items {
		h.wait(s.Token, it.RequestID, 5*time.Second)
	}
	h.do("GET", "/v1/requests", s.Token, nil)
	h.do("GET", "/v1/requests/"+id+"/events", s.Token, nil) // completed: one event, then the end
	h.do("GET", "/v1/requests/"+id+"/events", "", nil)
	h.do("POST", "/v1/verify", "", acds.VerifyRequest{AttestationBundle: r.Result.AttestationBundle, Output: r.Result.Output})
	h.do("DELETE", "/v1/requests/"+id, s.Token, nil)
	h.do("GET", "/v1/requests/"+id, s.Token, nil)
	// Errors.
	malformed := map[string]bool{}
	bad := func(method, path, token string, body any, headers ...string) {
		n := len(rc.log)
		h.do(method, path, token, body, headers...)
		malformed[key(rc.log[n].req)+string(rc.log[n].reqBody)] = true
	}
	bad("POST", "/v1/process", s.Token, `{"data":`)
	bad("POST", "/v1/process", s.Token, `{"data":{"resourceType":"Bundle"},"outputFormat":"fhir_r4","x":1}`)
	bad("POST", "/v1/process", s.Token, `{"data":{"resourceType":"Bundle"},"outputFormat":1}`)
	bad("POST", "/v1/process", s.Token, `{"outputFormat":"fhir_r4"}`)
	bad("POST", "/v1/auth/anon", "", `{"passphrase":"short"}`)
	bad("POST", "/v1/auth/recover", "", `{"pseudonym":"x"}`)
	bad("POST", "/v1/process", s.Token, `{}`, "Content-Type", "text/plain")
	bad("GET", "/v1/requests?limit=500", s.Token, nil)
	h.do("POST", "/v1/process", s.Token, `{"data":{"resourceType":"Bundle"},"outputFormat":"pdf"}`)
	h.do("POST", "/v1/process", s.Token, `{"data":{"type":"x"},"outputFormat":"fhir_r4"}`)
	h.do("POST", "/v1/fetch-and-attest", s.Token, `{"systemType":"x","portalUrl":"https://p.example","recordId":"1","username":"u","password":"p","outputFormat":"fhir_r4"}`)
	h.do("POST", "/v1/fetch-and-attest", s.Token, `{"systemType":"demo","portalUrl":"https://10.0.0.1","recordId":"1","username":"u","password":"p","outputFormat":"fhir_r4"}`)
	h.do("GET", "/v1/requests", "", nil)
	h.do("GET", "/metrics", "", nil)
	h.do("POST", "/v1/verify", "", `{"attestationBundle":"aGVsbG8="}`)
	other := h.anon()
	h.do("POST", "/v1/auth/revoke", other.Token, nil)
	h.do("GET", "/v1/requests", other.Token, nil) // 401: revoked
	// The store goes down: 503 with Retry-After, and health degraded.
	// Health reports the store's last outcome; the worker and the
	// webhook dispatcher call the store in the background too (methods
	// this fake does not fail), and one of their successes may land
	// between the failed list and the health check: then the pair is
	// tried again.
	st.down.Store(true)
	for try := 1; ; try++ {
		if resp, b := h.do("GET", "/v1/requests", s.Token, nil); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("list with the store down: %d %s", resp.StatusCode, b)
		}
		resp, b := h.do("GET", "/v1/health", "", nil)
		if resp.StatusCode == http.StatusServiceUnavailable && decode[acds.Health](t, b).Status == server.HealthDegraded {
			break
		}
		if try == 5 {
			t.Fatalf("health with the store down, %d tries: %d %s", try, resp.StatusCode, b)
		}
	}
	st.down.Store(false)

	// The report page (issue 17), on a server with package verify's
	// verifier and a real enclave.
	hr := realHarness(t, newRealEnclave(t), nil)
	rr := &recorder{next: hr.srv.Handler()}
	hr.ts.Config.Handler = rr
	hr.do("GET", "/verify", "", nil)
	pres := processed(t, hr)
	upload(t, hr, map[string][]byte{"attestationBundle": []byte(pres.AttestationBundle), "output": pres.Output})
	upload(t, hr, map[string][]byte{"attestationBundle": []byte("junk")})
	n := len(rr.log)
	hr.do("POST", "/verify", "", `{"attestationBundle":"aGVsbG8="}`)
	malformed[key(rr.log[n].req)+string(rr.log[n].reqBody)] = true
	rr.mu.Lock()
	rc.log = append(rc.log, rr.log...)
	rr.mu.Unlock()

	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(docBytes)
	if err != nil {
		t.Fatalf("loading the served document: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("the document is not valid OpenAPI: %v", err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Fatalf("openapi = %q", doc.OpenAPI)
	}
	doc.Servers = openapi3.Servers{{URL: h.ts.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	// kin-openapi has no decoder for the report page's HTML: read it as
	// the string its schema says it is.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.FileBodyDecoder)
	defer openapi3filter.UnregisterBodyDecoder("text/html")
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.FileBodyDecoder)
	defer openapi3filter.UnregisterBodyDecoder("text/event-stream")
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true}
	seen := map[string]bool{}
	for _, ex := range rc.log {
		req := ex.req.Clone(context.Background())
		req.URL.Scheme, req.URL.Host = "http", strings.TrimPrefix(h.ts.URL, "http://")
		req.Body = io.NopCloser(bytes.NewReader(ex.reqBody))
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Errorf("%s: no route in the document: %v", key(req), err)
			continue
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
		reqErr := openapi3filter.ValidateRequest(context.Background(), in)
		if malformed[key(ex.req)+string(ex.reqBody)] {
			if reqErr == nil {
				t.Errorf("%s %s: the server refused it (%d) but the document accepts it", key(req), ex.reqBody, ex.status)
			}
		} else if reqErr != nil && ex.status < 400 {
			t.Errorf("%s: a request the server accepted breaks the document: %v", key(req), reqErr)
		}
		rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: ex.status, Header: ex.header,
			Body: io.NopCloser(bytes.NewReader(ex.respBody)), Options: opts}
		if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
			t.Errorf("%s → %d: the response breaks the document: %v\n%s", key(req), ex.status, err, ex.respBody)
		}
		if ex.status < 300 {
			seen[route.Operation.OperationID] = true
		}
	}
	for _, pi := range doc.Paths.InMatchingOrder() {
		for _, op := range doc.Paths.Value(pi).Operations() {
			if !seen[op.OperationID] {
				t.Errorf("operation %s was never exercised successfully", op.OperationID)
			}
		}
	}
	if !bytes.Equal(server.OpenAPIDocument(), docBytes) {
		t.Error("served document differs from OpenAPIDocument()")
	}
	var anyDoc map[string]any
	if err := json.Unmarshal(docBytes, &anyDoc); err != nil {
		t.Fatal(err)
	}
}

func key(r *http.Request) string { return r.Method + " " + r.URL.RequestURI() }
