package portal_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/portal"
)

func TestPrivateKeyJWTClients(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p := startDemo(t, demoportal.Options{Patients: 2, ClientKey: &key.PublicKey})
	origin := strings.TrimSuffix(p.Base, "/fhir")
	for _, tc := range []struct {
		name string
		key  crypto.Signer
		ok   bool
	}{{"registered key", key, true}, {"other key", other, false}, {"no key", nil, false}} {
		for _, st := range []string{acds.SystemSMARTPassword, acds.SystemSMARTForm} {
			c := testConnector()
			c.Registrations = map[string]portal.Registration{origin: {ClientID: portal.DemoClientID, RedirectURI: portal.DemoRedirectURI, Key: tc.key, KeyID: "k1"}}
			_, err := c.Fetch(context.Background(), p.client, portal.Request{SystemType: st, PortalURL: p.Base, RecordID: demoportal.PatientID(1), Credentials: demoCreds})
			if tc.ok && err != nil {
				t.Errorf("%s, %s: %v", tc.name, st, err)
			}
			// The portal refusing the client (invalid_client) is the
			// registration's fault, not the user's credentials.
			if !tc.ok && (!errors.Is(err, portal.ErrUnsupported) || portal.ProblemCode(err) != acds.ProblemPortalUnsupported) {
				t.Errorf("%s, %s: %v, want portal-unsupported", tc.name, st, err)
			}
		}
	}
}
