package demoportal

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir"

	"github.com/acds-project/acds/portal"
)

// collection wraps a record's resources in a collection Bundle, as
// $everything would return them.
func collection(rec *record) []byte {
	var b bytes.Buffer
	b.WriteString(`{"resourceType":"Bundle","type":"collection","entry":[`)
	for i, r := range rec.Resources {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"fullUrl":"https://demo.invalid/fhir/` + r.Type + `/` + r.ID + `","resource":`)
		b.Write(r.JSON)
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// TestEveryDemoPatientValidates checks every patient of the default demo
// population (`acds portal` with no flags) against our own FHIR
// validation, and the spread of sizes.
func TestEveryDemoPatientValidates(t *testing.T) {
	d, err := New(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.records) != 25 {
		t.Fatalf("%d patients, want the default 25", len(d.records))
	}
	smallest, largest := 1<<62, 0
	types := map[string]bool{}
	for _, rec := range d.records {
		out := fhir.Validate(collection(rec))
		for _, is := range out.Issues {
			if is.Severity == fhir.SeverityError || is.Severity == fhir.SeverityFatal {
				t.Errorf("%s: %s", rec.ID, is)
				break
			}
		}
		smallest, largest = min(smallest, rec.Bytes), max(largest, rec.Bytes)
		for _, r := range rec.Resources {
			types[r.Type] = true
		}
	}
	if smallest > 20<<10 || largest < 4<<20 {
		t.Errorf("sizes from %d to %d bytes; want a few KB to several MB", smallest, largest)
	}
	for _, typ := range []string{"Patient", "Encounter", "Condition", "Observation", "MedicationRequest", "Immunization", "AllergyIntolerance", "Procedure"} {
		if !types[typ] {
			t.Errorf("no %s in the demo population", typ)
		}
	}
	if b := d.records[3].Bytes; b < 800<<10 || b > 1300<<10 {
		t.Errorf("patient 4 is %d bytes; the benchmark wants about 1 MB", b)
	}
	// The terminologies are the ones named.
	all := string(collection(d.records[2]))
	for _, sys := range []string{systemSNOMED, systemLOINC, systemRxNorm, systemCVX} {
		if !strings.Contains(all, sys) {
			t.Errorf("no %s codes", sys)
		}
	}
}

func TestDemoIsDeterministic(t *testing.T) {
	a, b, c := generate(5, 2), generate(5, 2), generate(6, 2)
	if !bytes.Equal(collection(a), collection(b)) {
		t.Error("the same seed gave different records")
	}
	if bytes.Equal(collection(a), collection(c)) {
		t.Error("different seeds gave the same record")
	}
}

// TestDemoLoginFormChecks drives the demo's App Launch endpoints by hand:
// the CSRF token and cookie are checked, PKCE is enforced, codes are
// single-use, and a patient-context token reads only its patient.
func TestDemoLoginFormChecks(t *testing.T) {
	p := startDemo(t, Options{Patients: 2})
	origin := strings.TrimSuffix(p.Base, "/fhir")
	verifier := strings.Repeat("v", 43)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {portal.DemoClientID}, "redirect_uri": {portal.DemoRedirectURI},
		"state": {"st"}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	get := func(hc *http.Client, u string) (*http.Response, string) {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	jarClient := func() *http.Client {
		hc := *p.client
		hc.Jar = newJar()
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		return &hc
	}
	// An unregistered redirect URI is refused without a redirect.
	bad := url.Values{}
	for k, v := range q {
		bad[k] = v
	}
	bad.Set("redirect_uri", "https://evil.example/cb")
	if resp, _ := get(jarClient(), origin+"/auth/authorize?"+bad.Encode()); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unregistered redirect: %d", resp.StatusCode)
	}
	// No PKCE, no login page.
	noPKCE := url.Values{}
	for k, v := range q {
		noPKCE[k] = v
	}
	noPKCE.Del("code_challenge")
	if resp, _ := get(jarClient(), origin+"/auth/authorize?"+noPKCE.Encode()); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no PKCE: %d", resp.StatusCode)
	}

	hc := jarClient()
	_, page := get(hc, origin+"/auth/authorize?"+q.Encode())
	vals := fillForm(t, page, "")
	post := func(hc *http.Client, path string, v url.Values) (*http.Response, string) {
		resp, err := hc.PostForm(origin+path, v)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	// Wrong CSRF token, or no session cookie: refused.
	wrong := url.Values{}
	for k, v := range vals {
		wrong[k] = v
	}
	wrong.Set("csrf_token", "forged")
	if resp, _ := post(hc, "/auth/login", wrong); resp.StatusCode != http.StatusForbidden {
		t.Errorf("forged CSRF token: %d", resp.StatusCode)
	}
	if resp, _ := post(jarClient(), "/auth/login", vals); resp.StatusCode != http.StatusForbidden {
		t.Errorf("no session cookie: %d", resp.StatusCode)
	}
	resp, page := post(hc, "/auth/login", vals)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `name="decision"`) {
		t.Fatalf("login: %d %s", resp.StatusCode, page)
	}
	vals = fillForm(t, page, PatientID(1))
	resp, _ = post(hc, "/auth/consent", vals)
	loc, _ := url.Parse(resp.Header.Get("Location"))
	code := loc.Query().Get("code")
	if resp.StatusCode != http.StatusFound || code == "" || loc.Query().Get("state") != "st" {
		t.Fatalf("consent: %d %s", resp.StatusCode, loc)
	}
	tokenReq := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {portal.DemoRedirectURI},
		"client_id": {portal.DemoClientID}, "code_verifier": {strings.Repeat("w", 43)}}
	if resp, _ := post(hc, "/auth/token", tokenReq); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("wrong verifier: %d", resp.StatusCode)
	}
	tokenReq.Set("code_verifier", verifier)
	if resp, _ := post(hc, "/auth/token", tokenReq); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("code reused after a failed exchange: %d", resp.StatusCode)
	}

	// A fresh run, choosing PatientID(1) at consent, gives a token whose
	// patient context is that patient and which reads no other.
	hc = jarClient()
	_, page = get(hc, origin+"/auth/authorize?"+q.Encode())
	_, page = post(hc, "/auth/login", fillForm(t, page, PatientID(1)))
	resp, _ = post(hc, "/auth/consent", fillForm(t, page, PatientID(1)))
	loc, _ = url.Parse(resp.Header.Get("Location"))
	tokenReq.Set("code", loc.Query().Get("code"))
	resp, body := post(hc, "/auth/token", tokenReq)
	var tok struct {
		AccessToken string `json:"access_token"`
		Patient     string `json:"patient"`
	}
	if err := json.Unmarshal([]byte(body), &tok); err != nil || resp.StatusCode != http.StatusOK || tok.AccessToken == "" {
		t.Fatalf("code exchange: %d %s", resp.StatusCode, body)
	}
	if tok.Patient != PatientID(1) {
		t.Errorf("patient context %q", tok.Patient)
	}
	req, _ := http.NewRequest("GET", p.Base+"/Patient/"+PatientID(0), nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	r2, err := p.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusNotFound {
		t.Errorf("a patient-context token read another patient: %d", r2.StatusCode)
	}
}

func newJar() http.CookieJar {
	j, _ := cookiejar.New(nil)
	return j
}
