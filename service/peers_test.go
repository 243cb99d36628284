package service_test

import (
	"context"
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/testrig/peers"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/service"
)

// TestPeersFetchAndAttestCoverage runs POST /v1/fetch-and-attest against
// Medplum's FHIR engine behind node-oidc-provider (the peers rig), with
// smart-form and recordId "", through the service's own notary and
// prover: the request completes with a coverage that lists every FHIR
// request the fetch made and what each answered, the signed claims carry
// the same coverage (POST /v1/verify's details.coverage and offline
// verification agree), and the output holds the patient's compartment.
func TestPeersFetchAndAttestCoverage(t *testing.T) {
	rig := peers.Start(t)
	origin, err := portal.Origin(rig.FHIRBase)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	svc, c := open(t, service.Options{DataDir: dataDir(t), PortalCA: rig.CAPEM, AllowPrivatePortals: true,
		PortalRegistrations: map[string]portal.Registration{origin: {ClientID: rig.Public.ID, RedirectURI: rig.Public.RedirectURI}}})
	c, _ = session(t, ctx, c)
	p := rig.Patients[0]
	acc, err := c.FetchAndAttest(ctx, acds.FetchAndAttestRequest{SystemType: acds.SystemSMARTForm, PortalURL: rig.FHIRBase, RecordID: "",
		Username: p.Username, Password: p.Password})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Wait(ctx, acc.RequestID)
	if err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("fetch: %+v %+v %v", rec, rec.Error, err)
	}
	cov := rec.Result.Coverage
	if cov == nil || cov.Everything || cov.CapabilityStatement || len(cov.Requests) < 60 {
		t.Fatalf("coverage %+v", cov)
	}
	entries := 0
	for _, r := range cov.Requests {
		entries += r.Entries
		if r.Status != 200 && r.Status != 404 && r.Status != 400 {
			t.Errorf("request %+v", r)
		}
	}
	if entries < p.Compartment {
		t.Errorf("the requests answered %d entries, the compartment holds %d", entries, p.Compartment)
	}
	if !strings.Contains(string(rec.Result.Output), `"id":"`+p.ID+`"`) {
		t.Errorf("the output is not Patient/%s's", p.ID)
	}
	v, err := c.Verify(ctx, acds.VerifyRequest{AttestationBundle: rec.Result.AttestationBundle, Output: rec.Result.Output})
	if err != nil || !v.Valid || !v.MPCTLSVerified {
		t.Fatalf("POST /v1/verify: %+v %v", v, err)
	}
	if !reflect.DeepEqual(v.Details.Coverage, cov) {
		t.Errorf("details.coverage differs from the result's")
	}
	bundle, _ := base64.StdEncoding.DecodeString(rec.Result.AttestationBundle)
	r, err := mustVerifier(t, offlinePolicy(t, svc.NotaryKey())).VerifyOutput(bundle, rec.Result.Output)
	if err != nil || !r.Valid || !reflect.DeepEqual(r.Claims.Coverage, cov) {
		t.Fatalf("offline: %v %v, coverage %+v", err, r.Err(), r.Claims.Coverage)
	}
	t.Logf("%s: %d requests, %d entries answered (compartment %d), %s", p.Name, len(cov.Requests), entries, p.Compartment, r.CoverageSummary())
}
