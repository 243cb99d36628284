package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/disclosure"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/client/attested"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/service"
	"github.com/acds-project/acds/verify"
)

// demoSeed, demoPatients and demoPatient pick the demo portal's population
// and the record the demo fetches: patient 2 of seed 1, about 60 KB.
const (
	demoSeed     = 1
	demoPatients = 3
	demoPatient  = 1 // index into the portal's patients
)

// runDemo runs the whole flow in one process: the demo portal (HTTPS, its
// own CA), the API server with the simulated enclave, attested TLS and the
// in-process notary, all on free loopback ports with their data in a
// temporary directory. It creates an anonymous session over attested TLS,
// fetches a patient's record with fetch-and-attest, submits the fetched
// record to /v1/process for de-identification and queries it with
// FHIRPath, verifies the three attestation bundles and a selective
// disclosure offline with package verify and prints a summary.
//
//	acds demo [--keep]
//
// With --keep it then prints the URLs and credentials and keeps everything
// running (and the data directory) until interrupted. Exit 0 only when
// every step succeeded and everything verified, 1 otherwise, 2 on a usage
// error.
func runDemo(ctx context.Context, e env) int {
	flags := flag.NewFlagSet("acds demo", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	keep := flags.Bool("keep", false, "keep the servers running (and their data) after the run, until interrupted")
	setUsage(flags, help{usage: []string{"acds demo [--keep]"},
		about: `
Starts the demo portal, the notary and the server in this process, fetches and
attests a record, processes it (de-identified, and a FHIRPath query), discloses
one entry, verifies the three bundles and the disclosure offline and prints a
summary.`,
		exit: "0 every step succeeded and everything verified, 1 otherwise, 2 usage error."})
	args, err := parseArgs(flags, e.args, e.stdout)
	if err != nil {
		return parseExit(err)
	}
	if len(args) != 0 {
		fmt.Fprintf(e.stderr, "acds demo: unexpected argument %q\n", args[0])
		return 2
	}
	dir, err := os.MkdirTemp("", "acds-demo-")
	if err != nil {
		fmt.Fprintf(e.stderr, "acds demo: %v\n", err)
		return 1
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	code, err := demo(ctx, e, dir, demoOptions{keep: *keep})
	if err != nil {
		fmt.Fprintf(e.stderr, "acds demo: FAILED: %v\n", err)
		if *keep {
			fmt.Fprintf(e.stderr, "acds demo: logs and data kept in %s\n", dir)
		} else {
			fmt.Fprintf(e.stderr, "acds demo: run with --keep to keep the logs and data (%s)\n", filepath.Join(dir, "acds.log"))
		}
	}
	return code
}

// stackOptions configure startStack.
type stackOptions struct {
	// Dir holds the data directory, the portal's CA and the log.
	Dir string
	// Patients and Seed make the demo portal's population.
	Patients int
	Seed     uint64
	// Username and Password are the portal's account; empty means the
	// demo account.
	Username, Password string
	// TLS serves the API with attested TLS.
	TLS bool
	// Log receives the server's logs (JSON); nil discards them.
	Log io.Writer
	// Tune adjusts the server configuration (tests wrap the store and the
	// fetcher with it).
	Tune func(*server.Config)
}

// stack is a running demo portal and `acds serve` in this process.
type stack struct {
	Portal     *demoportal.Portal
	PortalURL  string // the FHIR base URL (https://localhost:PORT/fhir)
	BaseURL    string // the API (http or https://127.0.0.1:PORT)
	CAFile     string // the portal's CA certificate
	DataDir    string
	NotaryKey  ed25519.PublicKey // the in-process notary's key
	Enclave    *attestation.Enclave
	serveDone  chan error
	cancel     context.CancelFunc
	closeOnce  sync.Once
	closeError error
}

// startStack starts the demo portal and the server (the same wiring as
// `acds serve`: SQLite store, simulated enclave, in-process notary, portal
// fetcher through the MPC-TLS prover) on free loopback ports, and returns
// once the server is serving.
func startStack(ctx context.Context, o stackOptions) (*stack, error) {
	d, err := demoportal.New(demoportal.Options{Seed: o.Seed, Patients: o.Patients, Username: o.Username, Password: o.Password})
	if err != nil {
		return nil, fmt.Errorf("demo portal: %w", err)
	}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo portal: %w", err)
	}
	go func() { _ = d.Serve(pl) }()
	s := &stack{Portal: d, PortalURL: portalBaseURL(pl.Addr().(*net.TCPAddr), "127.0.0.1:0"),
		CAFile: filepath.Join(o.Dir, "portal-ca.pem"), DataDir: filepath.Join(o.Dir, "data"), serveDone: make(chan error, 1)}
	if err := os.WriteFile(s.CAFile, d.CACertPEM(), 0o600); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("demo portal CA: %w", err)
	}
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	f := &serveFlags{addr: "127.0.0.1:0", dataDir: s.DataDir, portalCA: s.CAFile, allowPrivatePortals: true,
		workers: 4, rateLimit: server.DefaultRateLimit, tls: o.TLS, logLevel: "info"}
	log := slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	ready := &readyWriter{line: make(chan string, 1)}
	opened := func(svc *service.Service) { s.NotaryKey, s.Enclave = svc.NotaryKey(), svc.Enclave() }
	go func() { s.serveDone <- serve(sctx, f, ready, log, o.Tune, opened) }()
	select {
	case line := <-ready.line:
		_, rest, ok := strings.Cut(line, " serving on ")
		url, _, _ := strings.Cut(rest, " ") // the enclave note follows the URL
		if !ok || url == "" {
			s.Close()
			return nil, fmt.Errorf("server: unexpected ready line %q", line)
		}
		s.BaseURL = url
	case err := <-s.serveDone:
		cancel()
		_ = d.Close()
		if err == nil {
			err = errors.New("stopped before serving")
		}
		return nil, fmt.Errorf("server: %w", err)
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
	return s, nil
}

// Close stops the server (draining it) and the portal.
func (s *stack) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.closeError = <-s.serveDone
		_ = s.Portal.Close()
	})
	return s.closeError
}

// readyWriter passes the first line written (serve's ready line) on.
type readyWriter struct {
	mu   sync.Mutex
	buf  []byte
	done bool
	line chan string
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if i := strings.IndexByte(string(w.buf), '\n'); i >= 0 {
		w.done = true
		w.line <- string(w.buf[:i])
	}
	return len(p), nil
}

// demoPolicy is the offline verification policy of the demo: this
// binary's code hash, the simulated enclave (the demo has no hardware) and
// the in-process notary's key.
func demoPolicy(notaryKey ed25519.PublicKey) (verify.Policy, error) {
	ms, _, err := verify.SelfMeasurements()
	if err != nil {
		return verify.Policy{}, err
	}
	p := verify.Policy{
		Measurements:                   ms,
		UnsafeAllowSimulation:          true,
		UnsafeTrustBundleSimulatedRoot: true,
		Now:                            time.Now,
	}
	if notaryKey != nil {
		p.NotaryKeys = []ed25519.PublicKey{notaryKey}
	}
	return p, nil
}

// demoOptions adjust a demo run.
type demoOptions struct {
	keep bool
	// offlinePolicy, when set, changes the offline verification policy
	// (tests make verification fail with it).
	offlinePolicy func(*verify.Policy)
}

// demo runs the flow; it returns the exit code, with an error saying what
// failed when it is not 0.
func demo(ctx context.Context, e env, dir string, o demoOptions) (int, error) {
	keep := o.keep
	prog := newProgress(e.stderr)
	t0 := time.Now()
	logf, err := os.OpenFile(filepath.Join(dir, "acds.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 1, err
	}
	defer logf.Close()

	prog.step("starting the demo portal, the notary and the server (attested TLS)")
	s, err := startStack(ctx, stackOptions{Dir: dir, Patients: demoPatients, Seed: demoSeed, TLS: true, Log: logf})
	if err != nil {
		return 1, err
	}
	defer s.Close()
	startup := time.Since(t0)
	patient := s.Portal.Patients()[demoPatient]

	policy, err := demoPolicy(s.NotaryKey)
	if err != nil {
		return 1, err
	}
	// The client checks the enclave's evidence in every TLS handshake,
	// before the session request, token or portal credentials are sent.
	checker, err := attested.NewChecker(verify.Policy{Measurements: policy.Measurements,
		UnsafeAllowSimulation: true, UnsafeTrustBundleSimulatedRoot: true, Now: time.Now}, nil)
	if err != nil {
		return 1, err
	}
	c, err := checker.Client(s.BaseURL, &client.Options{PollInterval: 100 * time.Millisecond})
	if err != nil {
		return 1, err
	}
	sess, err := c.Anon(ctx, "")
	if err != nil {
		return 1, fmt.Errorf("anonymous session: %w", err)
	}
	c = c.WithToken(sess.Token)
	prog.step(fmt.Sprintf("server %s is an attested enclave; session %s", s.BaseURL, sess.Pseudonym))

	// 1. Fetch and attest.
	t1 := time.Now()
	acc, err := c.FetchAndAttest(ctx, acds.FetchAndAttestRequest{SystemType: acds.SystemDemo, PortalURL: s.PortalURL,
		RecordID: patient.ID, Username: demoportal.Username, Password: demoportal.Password,
		OutputFormat: acds.OutputFHIRR4})
	if err != nil {
		return 1, fmt.Errorf("fetch-and-attest: %w", err)
	}
	fetched, err := waitWithProgress(ctx, c, prog, "fetch-and-attest "+patient.ID, acc.RequestID)
	if err != nil {
		return 1, err
	}
	fetchTime := time.Since(t1)

	// 2. Process: the fetched record, de-identified.
	t2 := time.Now()
	acc, err = c.Process(ctx, acds.ProcessRequest{Data: fetched.Result.Output, OutputFormat: acds.OutputFHIRR4Deidentified})
	if err != nil {
		return 1, fmt.Errorf("process: %w", err)
	}
	processed, err := waitWithProgress(ctx, c, prog, "process (de-identify)", acc.RequestID)
	if err != nil {
		return 1, err
	}
	processTime := time.Since(t2)

	// 2b. An attested query over the same record (DESIGN §9).
	acc, err = c.Process(ctx, acds.ProcessRequest{Data: fetched.Result.Output, OutputFormat: acds.OutputFHIRPath, Query: demoQuery})
	if err != nil {
		return 1, fmt.Errorf("process (query): %w", err)
	}
	queried, err := waitWithProgress(ctx, c, prog, "attested query", acc.RequestID)
	if err != nil {
		return 1, err
	}

	// 3. Verify every bundle offline: nothing the server says is trusted.
	prog.step("verifying the attestation bundles and a disclosure offline")
	t3 := time.Now()
	if o.offlinePolicy != nil {
		o.offlinePolicy(&policy)
	}
	v, err := verify.New(policy)
	if err != nil {
		return 1, err
	}
	fres, err := verifyResult(v, fetched.Result)
	if err != nil {
		return 1, fmt.Errorf("fetch-and-attest bundle: %w", err)
	}
	pres, err := verifyResult(v, processed.Result)
	if err != nil {
		return 1, fmt.Errorf("process bundle: %w", err)
	}
	qres, err := verifyResult(v, queried.Result)
	if err != nil {
		return 1, fmt.Errorf("query bundle: %w", err)
	}
	// One entry of the fetched record disclosed alone, verified offline.
	dref, dres, err := demoDisclosure(v, fetched.Result)
	if err != nil {
		return 1, fmt.Errorf("disclosure: %w", err)
	}
	verifyTime := time.Since(t3)
	prog.done()

	summary, err := fhir.Summarize(fetched.Result.Output)
	if err != nil {
		return 1, fmt.Errorf("fetched output: %w", err)
	}
	w := e.stdout
	fmt.Fprintf(w, "ACDS demo (%s enclave, measurement %s…)\n", fres.Profile, fmt.Sprintf("%x", fres.Measurement)[:16])
	sessions := 0
	if fres.Claims != nil {
		sessions = len(fres.Claims.Source.Sessions)
	}
	fmt.Fprintf(w, "fetched: patient %s (%s) from %s via systemType %s, %d notarized TLS sessions\n",
		patient.ID, patient.Name, summary.Source, acds.SystemDemo, sessions)
	fmt.Fprintf(w, "  resources: %d (%s)\n", summary.Total(), summary)
	fmt.Fprintf(w, "  bytes: %d at the portal, %d normalised output\n", patient.Bytes, len(fetched.Result.Output))
	fmt.Fprintf(w, "  output digest: %s\n", fetched.Result.OutputDigest)
	fmt.Fprintf(w, "processed: the fetched record as %s\n", processed.Result.OutputFormat)
	fmt.Fprintf(w, "  output digest: %s\n", processed.Result.OutputDigest)
	fmt.Fprintf(w, "verified offline (package verify):\n")
	fmt.Fprintf(w, "  fetch-and-attest: %s\n", flagsLine(fres))
	fmt.Fprintf(w, "  process:          %s\n", flagsLine(pres))
	fmt.Fprintf(w, "  query:            %s\n", flagsLine(qres))
	if q := qres.Response().Details.Query; q != nil {
		fmt.Fprintf(w, "    %q over record %s gave %s\n", q.Expression, q.RecordDigest, queryValues(queried.Result.Output))
	}
	fmt.Fprintf(w, "  disclosure:       %s\n", flagsLine(dres))
	fmt.Fprintf(w, "    entry %s of the fetched record shown alone, under the signed root of its %d entries\n", dref, dres.Claims.Entries.Count)
	st := checker.Stats()
	fmt.Fprintf(w, "  attested TLS: the enclave's evidence was verified in the handshake (%d verification, %d connections from the cache, %d refused)\n",
		st.Verified, st.Cached, st.Refused)
	for _, r := range fres.Relaxations {
		fmt.Fprintf(w, "  note: %s\n", r)
	}
	fmt.Fprintf(w, "timings: startup %s, fetch-and-attest %s, process %s, offline verification %s, total %s\n",
		round(startup), round(fetchTime), round(processTime), round(verifyTime), round(time.Since(t0)))

	var problems []string
	if !fres.Valid || !fres.EnclaveHashMatch || !fres.MPCTLSVerified || !fres.TEEQuoteVerified {
		problems = append(problems, "the fetch-and-attest bundle did not verify: "+strings.Join(fres.Reasons(), "; "))
	}
	if !pres.Valid || !pres.EnclaveHashMatch || !pres.TEEQuoteVerified {
		problems = append(problems, "the process bundle did not verify: "+strings.Join(pres.Reasons(), "; "))
	}
	if !qres.Valid || qres.Claims == nil || qres.Claims.Query == nil {
		problems = append(problems, "the query bundle did not verify: "+strings.Join(qres.Reasons(), "; "))
	}
	if !dres.Valid || len(dres.Disclosed) != 1 {
		problems = append(problems, "the disclosure did not verify: "+strings.Join(dres.Reasons(), "; "))
	}
	if len(problems) > 0 {
		fmt.Fprintln(w, "result: NOT VERIFIED")
		return 1, errors.New(strings.Join(problems, "\n"))
	}
	fmt.Fprintln(w, "result: everything verified")

	if keep {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "kept running (Ctrl-C to stop):\n")
		fmt.Fprintf(w, "  API:           %s (attested TLS: acds verify --server %s --allow-simulated)\n", s.BaseURL, s.BaseURL)
		fmt.Fprintf(w, "  bearer token:  %s\n", sess.Token)
		fmt.Fprintf(w, "  portal:        %s (CA %s)\n", s.PortalURL, s.CAFile)
		fmt.Fprintf(w, "  portal login:  username %q password %q, patients %s\n", demoportal.Username, demoportal.Password, patientIDs(s.Portal))
		fmt.Fprintf(w, "  data and logs: %s\n", dir)
		<-ctx.Done()
	}
	if err := s.Close(); err != nil {
		return 1, fmt.Errorf("server shutdown: %w", err)
	}
	return 0, nil
}

// waitWithProgress polls request id until it ends, showing its status,
// and returns it when it completed.
func waitWithProgress(ctx context.Context, c *client.Client, prog *progress, label, id string) (*acds.Request, error) {
	start := time.Now()
	prog.step(fmt.Sprintf("%s: accepted as %s", label, id))
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// client.Wait long-polls, so the completion is seen as soon as it is
	// stored; the ticker only redraws the progress line meanwhile.
	type outcome struct {
		r   *acds.Request
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := c.Wait(wctx, id)
		done <- outcome{r, err}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case o := <-done:
			if o.r == nil { // the wait itself failed; a failed request comes with its record
				return nil, fmt.Errorf("%s: %w", label, o.err)
			}
			r := o.r
			if r.Status != acds.StatusCompleted || r.Result == nil {
				prog.step(fmt.Sprintf("%s: %s after %s", label, r.Status, round(time.Since(start))))
				if r.Error != nil {
					return nil, fmt.Errorf("%s: %s: %w", label, r.Status, r.Error)
				}
				return nil, fmt.Errorf("%s: %s without a result", label, r.Status)
			}
			prog.step(fmt.Sprintf("%s: completed in %s", label, round(time.Since(start))))
			return r, nil
		case <-tick.C:
			prog.status(fmt.Sprintf("%s: processing %s", label, round(time.Since(start).Truncate(100*time.Millisecond))))
		}
	}
}

// demoQuery is the attested query the demo asks.
const demoQuery = "Patient.birthDate | Observation.count()"

// queryValues summarises the result parameters of a query output.
func queryValues(output []byte) string {
	var p struct {
		Parameter []map[string]json.RawMessage `json:"parameter"`
	}
	if json.Unmarshal(output, &p) != nil {
		return "an unreadable result"
	}
	var vals []string
	for _, x := range p.Parameter {
		if string(x["name"]) != `"result"` {
			continue
		}
		for k, v := range x {
			if k != "name" {
				vals = append(vals, string(v))
			}
		}
	}
	return "[" + strings.Join(vals, ", ") + "]"
}

// demoDisclosure discloses one entry of a fhir_r4 result (its first
// Observation, else its first entry) with the result's disclosure key and
// verifies the disclosure offline; it returns the entry's reference.
func demoDisclosure(v *verify.Verifier, r *acds.Result) (string, *verify.Result, error) {
	bundle, err := attestation.ReadBundle([]byte(r.AttestationBundle))
	if err != nil {
		return "", nil, err
	}
	key, err := base64.StdEncoding.DecodeString(r.DisclosureKey)
	if err != nil {
		return "", nil, fmt.Errorf("disclosure key: %w", err)
	}
	entries, err := disclosure.Entries(r.Output)
	if err != nil {
		return "", nil, err
	}
	idx := 0
	for i, e := range entries {
		if strings.HasPrefix(disclosure.Ref(e), "Observation/") {
			idx = i
			break
		}
	}
	d, err := disclosure.New(bundle, key, r.Output, []int{idx})
	if err != nil {
		return "", nil, err
	}
	js, err := d.Marshal()
	if err != nil {
		return "", nil, err
	}
	res, err := v.VerifyDisclosure(js)
	if err != nil {
		return "", nil, err
	}
	return disclosure.Ref(entries[idx]), res, nil
}

// verifyResult verifies a result's attestation bundle together with the
// output bytes it attests.
func verifyResult(v *verify.Verifier, r *acds.Result) (*verify.Result, error) {
	raw, err := attestation.ReadBundle([]byte(r.AttestationBundle))
	if err != nil {
		return nil, err
	}
	return v.VerifyOutput(raw, r.Output)
}

func flagsLine(r *verify.Result) string {
	s := fmt.Sprintf("valid=%t enclaveHashMatch=%t mpcTlsVerified=%t teeQuoteVerified=%t",
		r.Valid, r.EnclaveHashMatch, r.MPCTLSVerified, r.TEEQuoteVerified)
	if r.Claims != nil && r.Claims.Source.Kind == acds.SourceRaw {
		s += " (mpcTls does not apply to a direct submission)"
	}
	return s
}

func patientIDs(d *demoportal.Portal) string {
	var ids []string
	for _, p := range d.Patients() {
		ids = append(ids, p.ID)
	}
	return strings.Join(ids, ", ")
}

func round(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// progress shows what the demo is doing on stderr: on a terminal, one
// status line rewritten in place; otherwise plain lines, one per step.
type progress struct {
	w    io.Writer
	tty  bool
	open bool      // a status line is showing (tty only)
	last time.Time // when the last plain status line was printed
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// step prints a line that stays.
func (p *progress) step(msg string) {
	if p.tty && p.open {
		fmt.Fprint(p.w, "\r\033[K")
		p.open = false
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "• %s\n", msg)
}

// status shows a transient line; when not on a terminal, it prints a
// plain line at most every two seconds.
func (p *progress) status(msg string) {
	if !p.tty {
		if time.Since(p.last) >= 2*time.Second {
			p.last = time.Now()
			fmt.Fprintf(p.w, "  %s\n", msg)
		}
		return
	}
	fmt.Fprintf(p.w, "\r\033[K  %s", msg)
	p.open = true
}

// done clears a transient line.
func (p *progress) done() {
	if p.tty && p.open {
		fmt.Fprint(p.w, "\r\033[K")
		p.open = false
	}
}
