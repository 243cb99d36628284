package demoportal

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/acds-project/acds/portal"
	"golang.org/x/net/html"
)

// testPortal is a demo portal serving on a loopback listener.
type testPortal struct {
	*Portal
	Base   string // FHIR base URL, https://localhost:port/fhir
	client *http.Client
}

func startDemo(t testing.TB, opts Options) *testPortal {
	t.Helper()
	if opts.Patients == 0 {
		opts.Patients = 6
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve(l) }()
	t.Cleanup(func() {
		d.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("demo serve: %v", err)
		}
	})
	_, port, _ := net.SplitHostPort(l.Addr().String())
	tr := portal.Guard{AllowPrivate: true}.Transport(&tls.Config{RootCAs: d.CertPool()})
	t.Cleanup(tr.CloseIdleConnections)
	return &testPortal{Portal: d, Base: "https://localhost:" + port + "/fhir", client: &http.Client{Transport: tr}}
}

// fillForm fills the first form of a login or consent page the way a
// person would: hidden fields kept, the demo login in the text and
// password fields, patient chosen where the form offers it (else its
// first option), and the "allow" decision.
func fillForm(t testing.TB, page, patient string) url.Values {
	t.Helper()
	vals := url.Values{}
	z := html.NewTokenizer(strings.NewReader(page))
	inForm, userSet, sel, first := false, false, "", true
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		tok := z.Token()
		a := map[string]string{}
		for _, at := range tok.Attr {
			a[at.Key] = at.Val
		}
		switch {
		case tt == html.EndTagToken && tok.Data == "form":
			if inForm {
				return vals
			}
		case tt == html.EndTagToken && tok.Data == "select":
			sel = ""
		case tok.Data == "form":
			inForm = true
		case !inForm || a["name"] == "" && tok.Data != "option":
		case tok.Data == "input" && a["type"] == "hidden":
			vals.Set(a["name"], a["value"])
		case tok.Data == "input" && a["type"] == "password":
			vals.Set(a["name"], Password)
		case tok.Data == "input" && !userSet:
			vals.Set(a["name"], Username)
			userSet = true
		case tok.Data == "select":
			sel, first = a["name"], true
		case tok.Data == "option" && sel != "":
			if first || a["value"] == patient {
				vals.Set(sel, a["value"])
			}
			first = false
		case a["name"] == "decision" && a["value"] == "allow":
			vals.Set("decision", "allow")
		}
	}
	if !inForm {
		t.Fatalf("no form in %s", page)
	}
	return vals
}
