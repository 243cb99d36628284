package portal_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/internal/demo/demoportal/demoportaltest"
	"github.com/acds-project/acds/portal"
)

// testPortal is a demo portal serving on a loopback listener.
type testPortal struct {
	*demoportal.Portal
	Base   string // FHIR base URL, https://localhost:port/fhir
	Port   string
	client *http.Client
}

func startDemo(t testing.TB, opts demoportal.Options) *testPortal {
	t.Helper()
	if opts.Patients == 0 {
		opts.Patients = 6
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	s := demoportaltest.Start(t, opts)
	return &testPortal{Portal: s.Portal, Base: s.URL, Port: s.Port, client: s.Client}
}

// testConnector is a connector for loopback portals with quick retries.
func testConnector() *portal.Connector {
	return &portal.Connector{Guard: portal.Guard{AllowPrivate: true}, Backoff: 5 * time.Millisecond, Count: 40}
}

var demoCreds = portal.Credentials{Username: demoportal.Username, Password: demoportal.Password}

func TestEveryFlowFetchesTheRecord(t *testing.T) {
	p := startDemo(t, demoportal.Options{})
	want := p.Patients()[1]
	for _, st := range acds.SystemTypes() {
		t.Run(st, func(t *testing.T) {
			rec, err := testConnector().Fetch(context.Background(), p.client, portal.Request{SystemType: st, PortalURL: p.Base, RecordID: want.ID, Credentials: demoCreds})
			if err != nil {
				t.Fatal(err)
			}
			if rec.Resources != want.Resources || !rec.Coverage.Everything {
				t.Errorf("got %d resources (everything %v), want %d", rec.Resources, rec.Coverage.Everything, want.Resources)
			}
			if rec.Pages < 2 {
				t.Errorf("read %d pages; the test wants paging", rec.Pages)
			}
			if rec.Host != "localhost" || rec.RequestLines[0] != "GET /fhir/metadata HTTP/1.1" ||
				!strings.HasPrefix(rec.RequestLines[1], "GET /fhir/Patient/"+want.ID+"/$everything?") {
				t.Errorf("host %q, first requests %q", rec.Host, rec.RequestLines[:2])
			}
			if out := fhir.Validate(rec.FHIR); out.HasErrors() {
				t.Errorf("fetched bundle is invalid: %v", out.Issues[0])
			}
		})
	}
}
