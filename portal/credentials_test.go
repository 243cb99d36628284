package portal_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/portal"
)

// TestAdmitCredentials: credentials no portal could be sent are refused
// by Admit, naming the field and never the value; ordinary ones pass.
func TestAdmitCredentials(t *testing.T) {
	c := &portal.Connector{}
	req := func(system, user, pass string) portal.Request {
		return portal.Request{SystemType: system, PortalURL: "https://portal.example/fhir", RecordID: "p1",
			Credentials: portal.Credentials{Username: user, Password: pass}}
	}
	for _, ok := range []portal.Request{
		req(acds.SystemFHIRBasic, "alice", "pässwörd with spaces & symbols:!"),
		req(acds.SystemSMARTPassword, "user:with:colons", "p"), // a form or a grant carries a colon
		req(acds.SystemFHIRBasic, strings.Repeat("u", portal.MaxCredentialLen), "p"),
	} {
		if err := c.Admit(ok); err != nil {
			t.Errorf("%s %q: %v", ok.SystemType, ok.Credentials.Username[:min(10, len(ok.Credentials.Username))], err)
		}
	}
	for _, bad := range []struct {
		r     portal.Request
		field string
	}{
		{req(acds.SystemFHIRBasic, "zq:xw", "secret-1"), "username"},
		{req(acds.SystemFHIRBasic, "zq\x00xw", "secret-1"), "username"},
		{req(acds.SystemSMARTPassword, "zqxw\r\nX-Injected: 1", "secret-1"), "username"},
		{req(acds.SystemFHIRBasic, strings.Repeat("u", portal.MaxCredentialLen+1), "secret-1"), "username"},
		{req(acds.SystemFHIRBasic, "alice", "secret-1\n"), "password"},
		{req(acds.SystemFHIRBasic, "alice", "secret-\xff"), "password"},
		{req(acds.SystemFHIRBasic, "alice", strings.Repeat("p", 60<<10)), "password"},
	} {
		err := c.Admit(bad.r)
		if !errors.Is(err, portal.ErrInvalidRequest) || portal.ProblemField(err) != bad.field || portal.ProblemCode(err) != acds.ProblemInvalidRequest {
			t.Errorf("%s: %v (field %q), want invalid-request on %s", bad.field, err, portal.ProblemField(err), bad.field)
			continue
		}
		if strings.Contains(err.Error(), "secret-") || strings.Contains(err.Error(), "zq") {
			t.Errorf("the error quotes a credential: %v", err)
		}
	}
}
