package portal

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// TestUseTokenClassifies checks how x/oauth2's outcomes become the
// package's errors: OAuth2 error codes by class, the portal's answer never
// quoted beyond the redacted code and description, an exchange that never
// ran as unavailable, and a token without the bearer type refused.
func TestUseTokenClassifies(t *testing.T) {
	const secret = "pw-SECRET-1234"
	s := &session{c: testConnector(), red: newRedactor("user", secret)}
	resp := func(code int) *http.Response { return &http.Response{StatusCode: code} }
	for _, tc := range []struct {
		name string
		op   string
		err  error
		want []error
	}{
		{"locked", grantPassword, &oauth2.RetrieveError{Response: resp(400), Body: []byte(secret), ErrorCode: "invalid_grant", ErrorDescription: "account locked"}, []error{ErrAuthFailed, ErrAccountLocked}},
		{"wrong password", grantPassword, &oauth2.RetrieveError{Response: resp(400), Body: []byte(secret), ErrorCode: "invalid_grant", ErrorDescription: "bad password " + secret}, []error{ErrAuthFailed}},
		{"401 without a code", grantPassword, &oauth2.RetrieveError{Response: resp(401), Body: []byte(secret)}, []error{ErrAuthFailed}},
		{"code refused", grantCode, &oauth2.RetrieveError{Response: resp(400), ErrorCode: "invalid_grant", ErrorDescription: "bad code_verifier"}, []error{ErrResponseInvalid}},
		{"mfa", grantPassword, &oauth2.RetrieveError{Response: resp(403), ErrorCode: "mfa_required"}, []error{ErrMFARequired}},
		{"unknown client", grantCode, &oauth2.RetrieveError{Response: resp(401), ErrorCode: "invalid_client"}, []error{ErrUnsupported}},
		{"client not allowed", grantPassword, &oauth2.RetrieveError{Response: resp(400), ErrorCode: "unauthorized_client"}, []error{ErrUnsupported}},
		{"no password grant", grantPassword, &oauth2.RetrieveError{Response: resp(400), Body: []byte(secret), ErrorCode: "unsupported_grant_type"}, []error{ErrUnsupported}},
		{"scope refused", grantPassword, &oauth2.RetrieveError{Response: resp(400), ErrorCode: "invalid_scope", ErrorDescription: "launch/patient"}, []error{ErrUnsupported}},
		{"scope refused at exchange", grantCode, &oauth2.RetrieveError{Response: resp(400), ErrorCode: "invalid_scope"}, []error{ErrUnsupported}},
		{"portal failing", grantCode, &oauth2.RetrieveError{Response: resp(400), ErrorCode: "temporarily_unavailable"}, []error{ErrUnavailable}},
		{"nonsense", grantCode, &oauth2.RetrieveError{Response: resp(418), ErrorCode: "teapot"}, []error{ErrResponseInvalid}},
		{"no access token", grantCode, &oauth2.RetrieveError{Response: resp(200), Body: []byte(secret), ErrorDescription: "server response missing access_token"}, []error{ErrResponseInvalid}},
		{"never sent", grantCode, &url.Error{Op: "Post", URL: "https://portal.example/token", Err: context.Canceled}, []error{ErrUnavailable}},
		{"classified by do", grantCode, &url.Error{Op: "Post", URL: "https://portal.example/token", Err: &Error{Kind: ErrForbidden}}, []error{ErrForbidden}},
	} {
		err := s.useToken(tc.op, nil, tc.err)
		for _, w := range tc.want {
			if !errors.Is(err, w) {
				t.Errorf("%s: %v, want %v", tc.name, err, w)
			}
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: %q quotes the portal's answer", tc.name, err)
		}
	}
	if err := s.useToken("code exchange", &oauth2.Token{AccessToken: "t", TokenType: "mac"}, nil); !errors.Is(err, ErrResponseInvalid) {
		t.Errorf("non-bearer token: %v", err)
	}
	tok := (&oauth2.Token{AccessToken: "tok-1", TokenType: "Bearer"}).WithExtra(map[string]any{"patient": "p7"})
	if err := s.useToken("code exchange", tok, nil); err != nil || s.patientContext != "p7" {
		t.Fatalf("bearer token: %v, patient %q", err, s.patientContext)
	}
	r, _ := http.NewRequest("GET", "https://portal.example/fhir/Patient/p7", nil)
	s.auth(r)
	if r.Header.Get("Authorization") != "Bearer tok-1" || !strings.Contains(s.red.apply("x tok-1 y"), "[redacted]") {
		t.Error("the token is not used, or not redacted")
	}
}
