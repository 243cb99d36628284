package portal_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/portal"
)

// portalHost is the name the notarized tests use for the demo portal: the
// test notary resolves every name to 127.0.0.1, and TLS needs a name (SNI)
// rather than an address.
const portalHost = "portal.acds.test"

// notarizedSetup starts a demo portal and a real notary (mpctls/notary on
// loopback) trusting the portal's CA, and returns a portal.Fetcher whose
// transports are fresh MPC-TLS provers (mpctls/prover) per fetch.
func notarizedSetup(t testing.TB, opts demoportal.Options, allow func(netip.AddrPort) error) (*testPortal, *portal.Fetcher, []ed25519.PublicKey) {
	t.Helper()
	opts.Hosts = append(opts.Hosts, portalHost)
	p := startDemo(t, opts)
	n := notarytest.StartNotary(t, notary.Config{Roots: p.CertPool(), AllowAddr: allow})
	keys := []ed25519.PublicKey{n.Key}
	f := &portal.Fetcher{
		Connector: *testConnector(),
		NewTransport: portal.Notarized{Notary: n.Addr, NotaryKeys: keys, TLSConfig: &tls.Config{RootCAs: p.CertPool()},
			Guard: portal.Guard{AllowPrivate: true}}.Factory(),
	}
	return p, f, keys
}

func TestNotarizedFetchEndToEnd(t *testing.T) {
	p, f, keys := notarizedSetup(t, demoportal.Options{Patients: 3}, notarytest.LoopbackOnly)
	base := "https://" + portalHost + ":" + p.Port + "/fhir"
	want := p.Patients()[1]
	for _, st := range []string{acds.SystemFHIRBasic, acds.SystemSMARTForm} {
		t.Run(st, func(t *testing.T) {
			res, err := f.Fetch(context.Background(), portal.Request{SystemType: st, PortalURL: base, RecordID: want.ID, Credentials: demoCreds})
			if err != nil {
				t.Fatal(err)
			}
			if res.Resources != want.Resources || res.Host != portalHost {
				t.Errorf("got %d resources from %q, want %d from %q", res.Resources, res.Host, want.Resources, portalHost)
			}
			if len(res.RequestLines) < 2 || res.RequestLines[0] != "GET /fhir/metadata HTTP/1.1" ||
				!strings.HasPrefix(res.RequestLines[1], "GET /fhir/Patient/"+want.ID+"/$everything") {
				t.Fatalf("request lines %q", res.RequestLines)
			}
			if len(res.Sessions) == 0 {
				t.Fatal("no sessions")
			}
			// Each session names the requests it carried, so the claims
			// can say what every session was, not only the first.
			var carried []string
			for i, s := range res.Sessions {
				if len(s.RequestLines) == 0 || !strings.HasSuffix(s.RequestLines[0], " HTTP/1.1") || s.Host != portalHost || s.Proof == nil ||
					!bytes.Equal(s.Statement, s.Proof.Statement) {
					t.Errorf("session %d: host %q, request lines %q, proof %v", i, s.Host, s.RequestLines, s.Proof != nil)
				}
				carried = append(carried, s.RequestLines...)
			}
			for _, l := range res.RequestLines {
				if !slices.Contains(carried, l) {
					t.Errorf("no session carried %q", l)
				}
			}
			// The coverage accounts for every page, starting with the
			// CapabilityStatement's.
			pages := 0
			for _, r := range res.Coverage.Requests {
				pages += r.Pages
			}
			if c := res.Coverage; !c.Everything || !c.CapabilityStatement || pages != res.Pages || c.Requests[0].RequestLine != res.RequestLines[0] {
				t.Errorf("coverage %+v for %d pages", res.Coverage, res.Pages)
			}
			// Every statement is signed by the notary and names the portal;
			// together the sessions carry exactly the record's bytes.
			var disclosed []byte
			for i, sess := range res.Sessions {
				stmt := sess.Statement
				s, err := mpctls.VerifyStatement(stmt, keys, mpctls.Expect{SNI: portalHost})
				if err != nil {
					t.Fatalf("statement %d: %v", i, err)
				}
				if s.SNI != portalHost {
					t.Errorf("statement %d SNI %q", i, s.SNI)
				}
				pres, err := sess.Proof.PresentAll()
				if err != nil {
					t.Fatal(err)
				}
				d, err := mpctls.VerifyPresentation(stmt, pres, keys)
				if err != nil {
					t.Fatalf("presentation %d: %v", i, err)
				}
				disclosed = append(disclosed, d.Data()...)
			}
			pat := p.Resource("Patient/" + demoportal.PatientID(1))
			if !bytes.Contains(disclosed, pat) || !bytes.Contains(res.FHIR, pat) {
				t.Error("the notarized sessions do not carry the Patient resource that was returned")
			}
			if bytes.Contains(disclosed, []byte(demoportal.Password)) {
				// Presentations disclose server records only.
				t.Error("a presentation discloses the password")
			}
			if out := fhir.Validate(res.FHIR); out.HasErrors() {
				t.Errorf("invalid bundle: %v", out.Issues[0])
			}
		})
	}
}

// TestNotaryGuardRefusesPrivatePortals: with the strict guard as the
// notary's AllowAddr, a name that resolves to loopback is refused at the
// notary's connect, and the fetch fails as forbidden.
func TestNotaryGuardRefusesPrivatePortals(t *testing.T) {
	p, f, _ := notarizedSetup(t, demoportal.Options{Patients: 1}, portal.Guard{}.AllowAddrPort)
	base := "https://" + portalHost + ":" + p.Port + "/fhir"
	_, err := f.Fetch(context.Background(), portal.Request{SystemType: acds.SystemFHIRBasic, PortalURL: base, RecordID: demoportal.PatientID(0), Credentials: demoCreds})
	if !errors.Is(err, portal.ErrForbidden) || portal.ProblemCode(err) != acds.ProblemForbiddenPortal {
		t.Fatalf("error %v, want forbidden", err)
	}
}

func TestNotarizedFetchFailures(t *testing.T) {
	p, f, _ := notarizedSetup(t, demoportal.Options{Patients: 1, Failures: demoportal.Failures{Locked: true}}, notarytest.LoopbackOnly)
	base := "https://" + portalHost + ":" + p.Port + "/fhir"
	_, err := f.Fetch(context.Background(), portal.Request{SystemType: acds.SystemSMARTPassword, PortalURL: base, RecordID: demoportal.PatientID(0), Credentials: demoCreds})
	if !errors.Is(err, portal.ErrAccountLocked) {
		t.Fatalf("error %v, want locked", err)
	}
	// Plain http is refused before anything is dialled.
	f.Connector.Guard.AllowHTTP = true
	_, err = f.Fetch(context.Background(), portal.Request{SystemType: acds.SystemFHIRBasic, PortalURL: "http://" + portalHost + ":" + p.Port + "/fhir", RecordID: demoportal.PatientID(0), Credentials: demoCreds})
	if !errors.Is(err, portal.ErrForbidden) {
		t.Fatalf("plain http through the prover: %v, want forbidden", err)
	}
	// No transport factory, no fetch.
	_, err = (&portal.Fetcher{}).Fetch(context.Background(), portal.Request{SystemType: acds.SystemFHIRBasic, PortalURL: base, RecordID: demoportal.PatientID(0), Credentials: demoCreds})
	if !errors.Is(err, portal.ErrNotarization) {
		t.Fatalf("no factory: %v", err)
	}
}

// TestNotarizedCompartmentFetch: a record assembled from the compartment's
// searches (no $everything, bare ids matching nothing) through notarized
// sessions: the sessions carry every request the coverage lists, and the
// coverage accounts for every page the fetch read.
func TestNotarizedCompartmentFetch(t *testing.T) {
	p, f, _ := notarizedSetup(t, demoportal.Options{Patients: 3, Failures: demoportal.Failures{NoEverything: true, BareIDBlind: true}}, notarytest.LoopbackOnly)
	base := "https://" + portalHost + ":" + p.Port + "/fhir"
	want := p.Patients()[2]
	res, err := f.Fetch(context.Background(), portal.Request{SystemType: acds.SystemSMARTForm, PortalURL: base, RecordID: want.ID, Credentials: demoCreds})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resources != want.Resources || res.Coverage.Everything {
		t.Fatalf("%d resources (everything %v), want %d", res.Resources, res.Coverage.Everything, want.Resources)
	}
	var carried []string
	for _, s := range res.Sessions {
		carried = append(carried, s.RequestLines...)
	}
	pages := 0
	for _, r := range res.Coverage.Requests {
		pages += r.Pages
		if !slices.Contains(carried, r.RequestLine) {
			t.Errorf("no notarized session carried %q", r.RequestLine)
		}
	}
	if pages != res.Pages || len(res.RequestLines) != res.Pages {
		t.Errorf("coverage has %d pages, the fetch read %d in %d requests", pages, res.Pages, len(res.RequestLines))
	}
}
