package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

// fuzzEndpoints are the endpoints that parse untrusted bodies or queries.
var fuzzEndpoints = []struct{ method, path string }{
	{"POST", "/v1/process"},
	{"POST", "/v1/fetch-and-attest"},
	{"POST", "/v1/auth/anon"},
	{"POST", "/v1/auth/recover"},
	{"POST", "/v1/verify"},
	{"GET", "/v1/requests?"},
	{"GET", "/v1/requests/"},
}

// FuzzHandler sends arbitrary bodies (and query strings or ids) to every
// endpoint that parses input. The server must never panic or fail
// internally: every answer is a success or a 4xx problem document.
// Plain `go test` replays the seeds and testdata/fuzz/FuzzHandler.
func FuzzHandler(f *testing.F) {
	srv, err := server.New(server.Config{
		Store: servertest.NewMemStore(), Pipeline: &servertest.Pipeline{}, Enclave: servertest.NewEnclave(),
		Verifier: servertest.Verifier{}, Fetcher: &servertest.Fetcher{}, Workers: -1, RateLimit: -1, AuthRateLimit: -1,
		MaxBody: 4096, MaxProcessBody: 16384,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = srv.Close(f.Context()) })
	h := srv.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/auth/anon", nil))
	var sess acds.Session
	if err := json.Unmarshal(rec.Body.Bytes(), &sess); err != nil {
		f.Fatal(err)
	}

	for i, s := range []string{
		`{"data":{"resourceType":"Bundle","type":"collection"},"outputFormat":"fhir_r4"}`,
		`{"systemType":"demo","portalUrl":"https://p.example","recordId":"1","username":"u","password":"p","outputFormat":"fhir_r4"}`,
		`{"passphrase":"twelve characters"}`,
		`{"pseudonym":"anon_aaaaaaaaaaaaaaaaaaaaaaaaaa","passphrase":"twelve characters"}`,
		`{"attestationBundle":"aGVsbG8=","output":{"a":1}}`,
		`limit=5&cursor=MTIzLzQ1Ng`,
		`6f1c1f2e-9a55-4c38-9d4b-2f0e4f8a1b2c`,
	} {
		f.Add(uint8(i), []byte(s))
	}
	f.Add(uint8(0), []byte(`{"data":{"resourceType":"Bundle"},"outputFormat":"fhir_r4"} {}`))
	f.Add(uint8(0), []byte(`{"data":[1,2,3],"outputFormat":7}`))
	f.Add(uint8(1), []byte(`{"username":1}`))
	f.Add(uint8(4), []byte(`{"attestationBundle":"`+"\x00\xff"+`"}`))
	f.Add(uint8(2), []byte(`{"passphrase":"\ud800\udc00\ud800"}`))
	f.Add(uint8(5), []byte(`limit=%zz&cursor=`))

	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		ep := fuzzEndpoints[int(which)%len(fuzzEndpoints)]
		var req *http.Request
		switch ep.path {
		case "/v1/requests?":
			req = httptest.NewRequest("GET", "/v1/requests", nil)
			req.URL.RawQuery = string(data)
		case "/v1/requests/":
			req = httptest.NewRequest("GET", "/v1/requests/x", nil)
			req.URL.Path = "/v1/requests/" + string(bytes.ReplaceAll(data, []byte("/"), nil))
		default:
			req = httptest.NewRequest(ep.method, ep.path, bytes.NewReader(data))
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+sess.Token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", ep.method, ep.path, data, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var p acds.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != rec.Code || p.Type == "" {
				t.Fatalf("%s %s %q: %d with a body that is not a problem: %s", ep.method, ep.path, data, rec.Code, rec.Body)
			}
		}
	})
}
