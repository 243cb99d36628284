package portal_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/portal"
)

// Example fetches a record with the fhir-basic connector from a small
// FHIR server over a plain, guarded HTTPS client. In production the
// client's transport is the MPC-TLS prover (portal.Notarized, through a
// portal.Fetcher) and the guard is strict.
func Example() {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, _ := r.BasicAuth(); u != "alice" || p != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/fhir/Patient/p1/$everything" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/fhir+json")
		fmt.Fprint(w, `{"resourceType":"Bundle","type":"searchset","entry":[
			{"resource":{"resourceType":"Patient","id":"p1"}},
			{"resource":{"resourceType":"Observation","id":"o1","status":"final","subject":{"reference":"Patient/p1"}}}]}`)
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	guard := portal.Guard{AllowPrivate: true} // this portal runs on loopback
	hc := &http.Client{Transport: guard.Transport(&tls.Config{RootCAs: roots})}
	c := &portal.Connector{Guard: guard}
	req := portal.Request{
		SystemType:  acds.SystemFHIRBasic,
		PortalURL:   srv.URL + "/fhir",
		RecordID:    "p1",
		Credentials: portal.Credentials{Username: "alice", Password: "s3cret"},
	}
	rec, err := c.Fetch(context.Background(), hc, req)
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Host, rec.Resources, rec.Coverage.Everything)

	// A wrong password is a typed error with a problem code.
	req.Credentials.Password = "wrong"
	_, err = c.Fetch(context.Background(), hc, req)
	fmt.Println(portal.ProblemCode(err))
	// Output:
	// 127.0.0.1 2 true
	// portal-auth-failed
}
