package portal_test

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir/spec"
	"github.com/acds-project/acds/internal/testrig/peers"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
	"github.com/acds-project/acds/portal"
)

// TestPeersMedplumRecords fetches each Synthea patient of the peers rig
// from Medplum's FHIR engine (no CapabilityStatement, no $everything,
// references matched only as Patient/{id}) through the connector's
// smart-form login at node-oidc-provider, with recordId "" (the patient
// the login names), every connection notarized by a real notary. Each
// record must hold at least 95 % of the resources Medplum's own search
// finds in the patient's compartment, none of another patient's, and a
// coverage whose every request a notarized session carried. It logs, per
// patient, the compartment resources fetched against those held, by type
// where they differ, and the time of the fetch (go test -run
// TestPeersMedplumRecords -v ./portal/, after npm ci in
// internal/testrig/peers/testdata).
func TestPeersMedplumRecords(t *testing.T) {
	rig := peers.Start(t)
	n := notarytest.StartNotary(t, notary.Config{Roots: rig.Roots, AllowAddr: notarytest.LoopbackOnly})
	origin, err := portal.Origin(rig.FHIRBase)
	if err != nil {
		t.Fatal(err)
	}
	f := &portal.Fetcher{
		Connector: portal.Connector{Guard: portal.Guard{AllowPrivate: true},
			Registrations: map[string]portal.Registration{origin: {ClientID: rig.Public.ID, RedirectURI: rig.Public.RedirectURI}}},
		NewTransport: portal.Notarized{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key}, TLSConfig: &tls.Config{RootCAs: rig.Roots},
			Guard: portal.Guard{AllowPrivate: true}}.Factory(),
	}
	others := func(id string) []string {
		var out []string
		for _, p := range rig.Patients {
			if p.ID != id {
				out = append(out, p.ID)
			}
		}
		return out
	}
	if len(rig.Patients) < 3 {
		t.Fatalf("the rig holds %d patients, the test wants three", len(rig.Patients))
	}
	for _, p := range rig.Patients {
		start := time.Now()
		res, err := f.Fetch(context.Background(), portal.Request{SystemType: acds.SystemSMARTForm, PortalURL: rig.FHIRBase,
			RecordID: "", Credentials: portal.Credentials{Username: p.Username, Password: p.Password}})
		took := time.Since(start)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		byType, ids := compartmentOfRecord(t, res.FHIR)
		if !ids["Patient/"+p.ID] {
			t.Fatalf("%s: the record is not Patient/%s's (recordId \"\" is the login's patient)", p.Name, p.ID)
		}
		got := 0
		var diff []string
		for typ, held := range p.CompartmentByType {
			got += min(byType[typ], held)
			if byType[typ] != held {
				diff = append(diff, typ+" "+strconv.Itoa(byType[typ])+"/"+strconv.Itoa(held))
			}
		}
		for typ, n := range byType {
			if _, ok := p.CompartmentByType[typ]; !ok {
				diff = append(diff, typ+" "+strconv.Itoa(n)+"/0")
			}
		}
		slices.Sort(diff)
		share := 100 * float64(got) / float64(p.Compartment)
		t.Logf("%-16s Patient/%s: compartment %4d of %4d held (%5.1f %%), %3d outside it, %3d requests, %4d pages, %2d sessions, %v; differing types %v",
			p.Name, p.ID, got, p.Compartment, share, res.Resources-compartmentTotal(byType), len(res.Coverage.Requests), res.Pages, len(res.Sessions),
			took.Round(time.Millisecond), diff)
		if share < 95 {
			t.Errorf("%s: %.1f %% of the compartment, want at least 95 %%", p.Name, share)
		}
		for _, other := range others(p.ID) {
			if strings.Contains(string(res.FHIR), `"Patient/`+other+`"`) || ids["Patient/"+other] {
				t.Errorf("%s: the record names another patient, Patient/%s", p.Name, other)
			}
		}
		var carried []string
		for _, s := range res.Sessions {
			carried = append(carried, s.RequestLines...)
		}
		if res.Coverage.Everything || res.Coverage.CapabilityStatement {
			t.Errorf("%s: coverage everything %v, capabilityStatement %v; Medplum's engine has neither", p.Name, res.Coverage.Everything, res.Coverage.CapabilityStatement)
		}
		for _, r := range res.Coverage.Requests {
			if !slices.Contains(carried, r.RequestLine) {
				t.Errorf("%s: no notarized session carried %q", p.Name, r.RequestLine)
			}
		}
		// The same fetch without notarization, for the time it costs.
		plain := &http.Client{Transport: f.Connector.Guard.Transport(&tls.Config{RootCAs: rig.Roots})}
		start = time.Now()
		rec, err := f.Connector.Fetch(context.Background(), plain, portal.Request{SystemType: acds.SystemSMARTForm, PortalURL: rig.FHIRBase,
			Credentials: portal.Credentials{Username: p.Username, Password: p.Password}})
		if err != nil || rec.Resources != res.Resources {
			t.Fatalf("%s without notarization: %v", p.Name, err)
		}
		t.Logf("%-16s the same fetch without notarization: %v", p.Name, time.Since(start).Round(time.Millisecond))
	}
}

// compartmentOfRecord counts the resources of a fetched record by type,
// for the types of the Patient compartment, and returns every "Type/id".
func compartmentOfRecord(t *testing.T, fhir []byte) (map[string]int, map[string]bool) {
	t.Helper()
	var b struct {
		Entry []struct {
			Resource struct {
				ResourceType string `json:"resourceType"`
				ID           string `json:"id"`
			} `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(fhir, &b); err != nil {
		t.Fatal(err)
	}
	byType, ids := map[string]int{}, map[string]bool{}
	for _, e := range b.Entry {
		r := e.Resource
		ids[r.ResourceType+"/"+r.ID] = true
		if spec.PatientCompartmentType(r.ResourceType) != nil {
			byType[r.ResourceType]++
		}
	}
	return byType, ids
}

func compartmentTotal(byType map[string]int) int {
	n := 0
	for _, v := range byType {
		n += v
	}
	return n
}
