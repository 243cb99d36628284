package service_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/acds-project/acds/internal/testrig/pgtest"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/internal/demo/demoportal/demoportaltest"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/service"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/verify"
)

const sampleBundle = `{"resourceType":"Bundle","type":"collection","entry":[
 {"fullUrl":"urn:uuid:7f8a4e1e-2b1c-4c55-9f2e-0a1b2c3d4e5f",
  "resource":{"resourceType":"Patient","id":"p1","name":[{"family":"Chalmers","given":["Peter"]}],"birthDate":"1974-12-25"}}]}`

// dataDir is a fresh data directory whose simulated chip is made with
// 2048-bit ARK and ASK keys, to keep the tests quick on a loaded machine
// (Open makes 4096-bit ones, as AMD's, for a new installation).
func dataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := sim.NewBackend(filepath.Join(dir, "enclave"), sim.Options{RSABits: 2048}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// open opens a service in dir with o and serves its handler on loopback.
func open(t *testing.T, o service.Options) (*service.Service, *client.Client) {
	t.Helper()
	svc, err := service.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	ts := httptest.NewServer(svc.Handler())
	t.Cleanup(ts.Close)
	c, err := client.New(ts.URL, &client.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return svc, c
}

// offlinePolicy is an independent verification policy: the code hash of
// this test binary (what the simulated enclave measures), simulation
// allowed, and the given notary keys.
func offlinePolicy(t *testing.T, notaryKeys ...ed25519.PublicKey) verify.Policy {
	t.Helper()
	self, err := sim.MeasureSelf()
	if err != nil {
		t.Fatal(err)
	}
	return verify.Policy{Measurements: map[string][][]byte{attestation.ProfileSEVSNPSim: {self}},
		UnsafeAllowSimulation: true, UnsafeTrustBundleSimulatedRoot: true, NotaryKeys: notaryKeys}
}

// session opens an anonymous session; it returns the client with the
// token and the token.
func session(t *testing.T, ctx context.Context, c *client.Client) (*client.Client, string) {
	t.Helper()
	sess, err := c.Anon(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return c.WithToken(sess.Token), sess.Token
}

func process(t *testing.T, ctx context.Context, c *client.Client, format string) *acds.Request {
	t.Helper()
	acc, err := c.Process(ctx, acds.ProcessRequest{Data: json.RawMessage(sampleBundle), OutputFormat: format})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Wait(ctx, acc.RequestID)
	if err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("request %s: %+v %v", acc.RequestID, rec, err)
	}
	return rec
}

// TestProcessAndVerify processes a bundle end to end through Handler on
// the default SQLite store in the data directory, and verifies the
// attestation bundle offline with package verify: with an independent
// policy, with the service's own policy, and not for altered output.
func TestProcessAndVerify(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := dataDir(t)
	svc, c := open(t, service.Options{DataDir: dir})
	if want := "sqlite:" + filepath.Join(dir, "acds.db"); svc.StoreName() != want {
		t.Errorf("StoreName = %q, want %q", svc.StoreName(), want)
	}
	if _, err := os.Stat(filepath.Join(dir, "acds.db")); err != nil {
		t.Errorf("no SQLite database in the data dir: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "notary.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("in-process notary key: %v %v", fi, err)
	}
	c, _ = session(t, ctx, c)
	rec := process(t, ctx, c, acds.OutputFHIRR4)
	if !bytes.Contains(rec.Result.Output, []byte(`"resourceType":"Provenance"`)) {
		t.Error("the output has no Provenance: the FHIR pipeline did not run")
	}
	bundle, err := base64.StdEncoding.DecodeString(rec.Result.AttestationBundle)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]verify.Policy{"independent": offlinePolicy(t), "service": svc.Policy()} {
		r, err := mustVerifier(t, p).VerifyOutput(bundle, rec.Result.Output)
		if err != nil || !r.Valid || !r.TEEQuoteVerified || !r.EnclaveHashMatch || !r.OutputChecked {
			t.Fatalf("%s policy: %+v %v (%v)", name, r, err, r.Err())
		}
		if r.Claims.RequestID != rec.RequestID {
			t.Errorf("%s policy: claims for %q, want %q", name, r.Claims.RequestID, rec.RequestID)
		}
	}
	altered := bytes.Replace(rec.Result.Output, []byte("Chalmers"), []byte("Chalmerz"), 1)
	if r, err := mustVerifier(t, offlinePolicy(t)).VerifyOutput(bundle, altered); err != nil || r.Valid {
		t.Fatalf("altered output verified: %+v %v", r, err)
	}
	// POST /v1/verify is wired to the same verifier.
	v, err := c.Verify(ctx, acds.VerifyRequest{AttestationBundle: rec.Result.AttestationBundle, Output: rec.Result.Output})
	if err != nil || !v.Valid || !v.EnclaveHashMatch || !v.TEEQuoteVerified {
		t.Fatalf("POST /v1/verify: %+v %v", v, err)
	}
	// Invalid FHIR is refused at once with the validator's outcome.
	_, err = c.Process(ctx, acds.ProcessRequest{OutputFormat: acds.OutputFHIRR4,
		Data: json.RawMessage(`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","birthDate":"yesterday"}}]}`)})
	var p *acds.Problem
	if !errors.As(err, &p) || p.Code() != acds.ProblemInvalidFHIR {
		t.Fatalf("invalid FHIR: %v", err)
	}
}

// TestReopen: a second Open of the same data directory is the same
// installation: the same database (sessions and requests), simulated
// root, notary key and de-identification key.
func TestReopen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := dataDir(t)
	svc1, c1 := open(t, service.Options{DataDir: dir})
	c1, token := session(t, ctx, c1)
	first := process(t, ctx, c1, acds.OutputFHIRR4Deidentified)
	key1, policy1 := svc1.NotaryKey(), svc1.Policy()
	if err := svc1.Close(ctx); err != nil {
		t.Fatal(err)
	}

	svc2, c2 := open(t, service.Options{DataDir: dir})
	c2 = c2.WithToken(token)
	got, err := c2.Request(ctx, first.RequestID)
	if err != nil || got.Status != acds.StatusCompleted || got.Result.OutputDigest != first.Result.OutputDigest {
		t.Fatalf("the first boot's request after reopening: %+v %v", got, err)
	}
	if !svc2.NotaryKey().Equal(key1) {
		t.Error("the in-process notary key changed across restarts")
	}
	if p2 := svc2.Policy(); len(p2.SimulatedRoots) != 1 || !p2.SimulatedRoots[0].Equal(policy1.SimulatedRoots[0]) {
		t.Error("the installation's simulated root changed across restarts")
	}
	// The same installation pseudonymises the same patient the same way.
	second := process(t, ctx, c2, acds.OutputFHIRR4Deidentified)
	if id1, id2 := patientID(t, first.Result.Output), patientID(t, second.Result.Output); id1 == "" || id1 != id2 || id1 == "p1" {
		t.Errorf("de-identified patient ids %q and %q: want the same pseudonym across restarts", id1, id2)
	}
}

func patientID(t *testing.T, output []byte) string {
	t.Helper()
	var b struct {
		Entry []struct {
			Resource struct {
				ResourceType string `json:"resourceType"`
				ID           string `json:"id"`
			} `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(output, &b); err != nil {
		t.Fatal(err)
	}
	for _, e := range b.Entry {
		if e.Resource.ResourceType == "Patient" {
			return e.Resource.ID
		}
	}
	return ""
}

// blockingPipeline wraps a Pipeline: Process signals started, then waits
// for release or the end of its context.
type blockingPipeline struct {
	server.Pipeline
	started chan struct{}
	release chan struct{}
}

func (p blockingPipeline) Check(ctx context.Context, input []byte, format string) error {
	return p.Pipeline.(server.Checker).Check(ctx, input, format)
}

func (p blockingPipeline) Process(ctx context.Context, input []byte, o fhir.Options) (*fhir.Output, error) {
	p.started <- struct{}{}
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.Pipeline.Process(ctx, input, o)
}

// TestCloseDrains: Close waits for an in-flight request to finish (it is
// then completed in the store), and with a context that ends first it
// abandons the work and reports the context's error.
func TestCloseDrains(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := dataDir(t)
	bp := blockingPipeline{started: make(chan struct{}, 1), release: make(chan struct{})}
	svc, c := open(t, service.Options{DataDir: dir, Configure: func(c *server.Config) {
		bp.Pipeline = c.Pipeline
		c.Pipeline = bp
	}})
	c, token := session(t, ctx, c)
	acc, err := c.Process(ctx, acds.ProcessRequest{Data: json.RawMessage(sampleBundle), OutputFormat: acds.OutputFHIRR4})
	if err != nil {
		t.Fatal(err)
	}
	<-bp.started
	var closed atomic.Bool
	done := make(chan error, 1)
	go func() { err := svc.Close(ctx); closed.Store(true); done <- err }()
	time.Sleep(100 * time.Millisecond)
	if closed.Load() {
		t.Fatal("Close returned while a request was in flight")
	}
	close(bp.release)
	if err := <-done; err != nil {
		t.Fatalf("Close after the drain: %v", err)
	}
	if err := svc.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}

	// The drained request completed durably: a new boot serves it.
	bp2 := blockingPipeline{started: make(chan struct{}, 1), release: make(chan struct{})}
	svc2, c2 := open(t, service.Options{DataDir: dir, Configure: func(c *server.Config) {
		bp2.Pipeline = c.Pipeline
		c.Pipeline = bp2
	}})
	c2 = c2.WithToken(token)
	rec, err := c2.Request(ctx, acc.RequestID)
	if err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("drained request after restart: %+v %v", rec, err)
	}

	// A drain that runs out of time abandons the work.
	if _, err := c2.Process(ctx, acds.ProcessRequest{Data: json.RawMessage(sampleBundle), OutputFormat: acds.OutputFHIRR4}); err != nil {
		t.Fatal(err)
	}
	<-bp2.started
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	if err := svc2.Close(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a short deadline = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("abandoning took %v", d)
	}
}

// TestOptionsErrors: options that can never work fail Open with
// ErrInvalidOptions, and a mistyped DSN is not echoed (it may carry a
// password).
func TestOptionsErrors(t *testing.T) {
	dir := t.TempDir()
	pub, _, _ := ed25519.GenerateKey(nil)
	for _, tc := range []struct {
		name string
		o    service.Options
	}{
		{"no data dir", service.Options{}},
		{"external notary without key", service.Options{DataDir: dir, Notary: "127.0.0.1:7047"}},
		{"notary key without notary", service.Options{DataDir: dir, NotaryKey: pub}},
		{"notary not host:port", service.Options{DataDir: dir, Notary: "notary.example", NotaryKey: pub}},
		{"portal CA without a certificate", service.Options{DataDir: dir, PortalCA: []byte("not PEM")}},
		{"unknown store", service.Options{DataDir: dir, Store: "mysql://acds:hunter2-secret@db/acds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := service.Open(context.Background(), tc.o)
			if !errors.Is(err, service.ErrInvalidOptions) {
				if svc != nil {
					_ = svc.Close(context.Background())
				}
				t.Fatalf("Open = %v, want ErrInvalidOptions", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows the DSN's password: %v", err)
			}
		})
	}
	if _, err := service.OpenStore(context.Background(), "", ""); !errors.Is(err, service.ErrInvalidOptions) {
		t.Errorf("OpenStore without a place = %v, want ErrInvalidOptions", err)
	}
	// An unreachable PostgreSQL fails without showing the password.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := service.OpenStore(ctx, "postgres://acds:hunter2-secret@127.0.0.1:1/acds?sslmode=disable&connect_timeout=2", ""); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("OpenStore of an unreachable PostgreSQL = %v", err)
	}
}

// TestProvidedStore: a store given in Options.Server.Store is used and
// left open by Close; OpenStore names SQLite at a path.
func TestProvidedStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	path := filepath.Join(dir, "shared.db")
	st, err := service.OpenStore(ctx, "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	data := dataDir(t)
	svc, c := open(t, service.Options{DataDir: data, Server: server.Config{Store: st}})
	if svc.Store() != st || svc.StoreName() != "provided" {
		t.Fatalf("Store() = %v (%s), want the provided store", svc.Store(), svc.StoreName())
	}
	if _, err := os.Stat(filepath.Join(data, "acds.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a default database was made next to a provided store: %v", err)
	}
	c, _ = session(t, ctx, c)
	rec := process(t, ctx, c, acds.OutputFHIRR4)
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Still open after the first service's Close: ErrNotFound for another
	// owner, not ErrClosed.
	if _, err := st.GetRequest(ctx, "nobody", rec.RequestID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the provided store after Close: %v, want ErrNotFound", err)
	}
}

// TestAttestedTLS: with Options.TLS, TLSConfig serves the enclave's
// attested certificate, which a client checking the evidence with package
// verify accepts; without it TLSConfig fails with attestation.ErrNoTLSKey.
func TestAttestedTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := service.Open(ctx, service.Options{DataDir: dataDir(t), TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	cfg, err := svc.TLSConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: svc.Handler(), TLSConfig: cfg, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = hs.Serve(tls.NewListener(ln, cfg)) }()
	defer hs.Close()
	v := mustVerifier(t, offlinePolicy(t))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, // the evidence, not a CA, decides (VerifyConnection)
		VerifyConnection:   v.VerifyConnection,
	}}}
	c, err := client.New("https://"+ln.Addr().String(), &client.Options{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := c.Health(ctx); err != nil || h.Status != "healthy" {
		t.Fatalf("health over attested TLS: %+v %v", h, err)
	}
	// A verifier expecting other code refuses the handshake.
	other := offlinePolicy(t)
	other.Measurements[attestation.ProfileSEVSNPSim] = [][]byte{bytes.Repeat([]byte{1}, 48)}
	hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, VerifyConnection: mustVerifier(t, other).VerifyConnection}}
	if _, err := c.Health(ctx); err == nil {
		t.Fatal("a client expecting another measurement accepted the server")
	}

	plain, err := service.Open(ctx, service.Options{DataDir: dataDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)
	if _, err := plain.TLSConfig(nil); !errors.Is(err, attestation.ErrNoTLSKey) {
		t.Errorf("TLSConfig without Options.TLS = %v, want ErrNoTLSKey", err)
	}
}

// TestFetchAndAttest runs fetch-and-attest through the wiring: the demo
// portal over HTTPS (its CA in PortalCA), the in-process notary and the
// MPC-TLS prover. The bundle verifies offline with the notary key; a
// service without AllowPrivatePortals refuses the loopback portal.
func TestFetchAndAttest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	demo := demoportaltest.Start(t, demoportal.Options{Patients: 1, Seed: 3})
	port := demo.Port
	req := acds.FetchAndAttestRequest{SystemType: acds.SystemFHIRBasic, PortalURL: "https://localhost:" + port + "/fhir",
		RecordID: demo.Patients()[0].ID, OutputFormat: acds.OutputFHIRR4,
		Username: demoportal.Username, Password: demoportal.Password}

	svc, c := open(t, service.Options{DataDir: dataDir(t), PortalCA: demo.CACertPEM(), AllowPrivatePortals: true})
	c, _ = session(t, ctx, c)
	acc, err := c.FetchAndAttest(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Wait(ctx, acc.RequestID)
	if err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("fetch: %+v %+v %v", rec, rec.Error, err)
	}
	bundle, _ := base64.StdEncoding.DecodeString(rec.Result.AttestationBundle)
	r, err := mustVerifier(t, offlinePolicy(t, svc.NotaryKey())).VerifyOutput(bundle, rec.Result.Output)
	if err != nil || !r.Valid || !r.MPCTLSVerified {
		t.Fatalf("offline verification: %+v %v (%v)", r, err, r.Err())
	}
	// Without the notary key the mpc-tls source does not verify.
	if r, err := mustVerifier(t, offlinePolicy(t)).VerifyOutput(bundle, rec.Result.Output); err != nil || r.Valid || r.MPCTLSVerified {
		t.Fatalf("verified without trusting the notary: %+v %v", r, err)
	}

	_, strict := open(t, service.Options{DataDir: dataDir(t), PortalCA: demo.CACertPEM()})
	strict, _ = session(t, ctx, strict)
	_, err = strict.FetchAndAttest(ctx, req)
	var p *acds.Problem
	if !errors.As(err, &p) || p.Code() != acds.ProblemForbiddenPortal {
		t.Fatalf("loopback portal without AllowPrivatePortals: %v", err)
	}
}

// TestPostgres runs a request on PostgreSQL when ACDS_TEST_POSTGRES holds
// a DSN.
func TestPostgres(t *testing.T) {
	dsn := pgtest.DSN(t) // a schema of its own, not the shared public one
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := dataDir(t)
	svc, c := open(t, service.Options{DataDir: dir, Store: dsn})
	if svc.StoreName() != "postgres" {
		t.Errorf("StoreName = %q", svc.StoreName())
	}
	if _, err := os.Stat(filepath.Join(dir, "acds.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a SQLite database was made with a PostgreSQL store: %v", err)
	}
	c, _ = session(t, ctx, c)
	process(t, ctx, c, acds.OutputFHIRR4)
}

func mustVerifier(t *testing.T, p verify.Policy) *verify.Verifier {
	t.Helper()
	v, err := verify.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
