package portal_test

import (
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/portal"
)

// BenchmarkLogins fetches the demo's smallest record (patient 0, about 13
// KB) with each login, against fhir-basic (no login) as the baseline in
// the same run: the difference is the login's cost — discovery, the
// authorization request, the pages as each provider draws them, the
// consent, the code exchange.
func BenchmarkLogins(b *testing.B) {
	for _, bc := range []struct {
		name  string
		st    string
		pages demoportal.Pages
	}{
		{"fhir-basic", acds.SystemFHIRBasic, demoportal.Pages{}},
		{"smart-password", acds.SystemSMARTPassword, demoportal.Pages{}},
		{"smart-form/demo", acds.SystemSMARTForm, demoportal.Pages{}},
		{"smart-form/oidc-provider", acds.SystemSMARTForm, demoportal.Pages{Style: demoportal.StyleOIDCProvider}},
		{"smart-form/dex+chooser", acds.SystemSMARTForm, demoportal.Pages{Style: demoportal.StyleDex, Chooser: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := startDemo(b, demoportal.Options{Patients: 1, Pages: bc.pages})
			conn := testConnector()
			req := portal.Request{SystemType: bc.st, PortalURL: p.Base, RecordID: demoportal.PatientID(0), Credentials: demoCreds}
			b.ResetTimer()
			for b.Loop() {
				if _, err := conn.Fetch(b.Context(), p.client, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
