package demoportal_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/portal"
)

// Example fetches a record from the demo portal with the smart-form flow
// over a plain, guarded HTTPS client. In production the client's
// transport is the MPC-TLS prover (portal.Notarized) and the guard is
// strict.
func Example() {
	demo, err := demoportal.New(demoportal.Options{Seed: 1, Patients: 2})
	if err != nil {
		panic(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go demo.Serve(l)
	defer demo.Close()
	base := fmt.Sprintf("https://localhost:%d/fhir", l.Addr().(*net.TCPAddr).Port)

	guard := portal.Guard{AllowPrivate: true} // the demo runs on loopback
	hc := &http.Client{Transport: guard.Transport(&tls.Config{RootCAs: demo.CertPool()})}
	c := &portal.Connector{Guard: guard}
	rec, err := c.Fetch(context.Background(), hc, portal.Request{
		SystemType:  acds.SystemSMARTForm,
		PortalURL:   base,
		RecordID:    demoportal.PatientID(1),
		Credentials: portal.Credentials{Username: demoportal.Username, Password: demoportal.Password},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Host, rec.Coverage.Everything, rec.Resources == demo.Patients()[1].Resources)

	// A wrong password is a typed error with a problem code.
	_, err = c.Fetch(context.Background(), hc, portal.Request{
		SystemType: acds.SystemFHIRBasic, PortalURL: base, RecordID: demoportal.PatientID(1),
		Credentials: portal.Credentials{Username: demoportal.Username, Password: "wrong"},
	})
	fmt.Println(portal.ProblemCode(err))
	// Output:
	// localhost true true
	// portal-auth-failed
}
