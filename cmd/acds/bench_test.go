package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the SQLite driver of the store, for the floor's write

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/store"
)

// BenchmarkFetchAndAttest fetches the same ~1 MB demo patient (patient 4
// of seed 1) three ways in every iteration, so that all three run under
// the same machine load:
//
//	(a) plain: a net/http client with Basic auth over a fresh TLS
//	    connection, following next links (the baseline);
//	(b) attested: POST /v1/fetch-and-attest end to end — accept, seal,
//	    queue, notarized fetch through the MPC-TLS prover and notary, FHIR
//	    pipeline, attestation, stored result — observed through
//	    client.Wait;
//	(c) floor: the least work any correct implementation must do for that
//	    request, with no HTTP API, JSON envelope, polling or queue: the
//	    notarized fetch through the real prover and a notary (portal
//	    Fetcher, same connector; the notary is a second instance of the
//	    one the server runs in process, on loopback too), fhir.Process on the fetched bytes, one
//	    enclave attestation (enclave Attest, the same enclave) and one
//	    durable write of output and bundle to SQLite (WAL,
//	    synchronous=FULL: the commit is fsynced).
//
// It reports the median of each (plain-ms, attested-ms, floor-ms), the
// ratios b/a (the goal: ≤ 1.5), c/a and b/c (what the service adds
// over the floor), the time to the 202 (accept-ms: validation, sealing,
// the fsynced insert), the server-side time (server-ms: createdAt to
// completedAt, which leaves out the accept round trip and the delivery)
// and the delivery (delivery-ms: completedAt to client.Wait returning the
// record: storing the result, waking the long-poll, reading the record
// back, encoding, sending and decoding it; same machine, same clock), with
// the store's part of (b) timed through a wrapping store: the claim, the
// write of the result and the read of the completed request
// (store-claim-ms, store-complete-ms, store-get-ms).
func BenchmarkFetchAndAttest(b *testing.B) {
	ctx := context.Background()
	ts := &timedStore{}
	s, err := startStack(ctx, stackOptions{Dir: b.TempDir(), Patients: 4, Seed: 1,
		Tune: func(c *server.Config) { c.RateLimit = -1; ts.Store = c.Store; c.Store = ts }})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	p := s.Portal.Patients()[3]
	c, _ := client.New(s.BaseURL, &client.Options{PollInterval: 5 * time.Millisecond})
	sess, err := c.Anon(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	c = c.WithToken(sess.Token)
	creds := portal.Credentials{Username: demoportal.Username, Password: demoportal.Password}
	var accept, delivery []time.Duration
	attest := func() (time.Duration, error) {
		t := time.Now()
		acc, err := c.FetchAndAttest(ctx, acds.FetchAndAttestRequest{SystemType: acds.SystemFHIRBasic, PortalURL: s.PortalURL,
			RecordID: p.ID, Username: creds.Username, Password: creds.Password, OutputFormat: acds.OutputFHIRR4})
		if err != nil {
			return 0, err
		}
		accept = append(accept, time.Since(t))
		rec, err := c.Wait(ctx, acc.RequestID)
		if err != nil {
			return 0, err
		}
		got := time.Now()
		if rec.Status != acds.StatusCompleted || rec.CompletedAt == nil {
			return 0, fmt.Errorf("request %s: %+v", rec.Status, rec.Error)
		}
		delivery = append(delivery, got.Sub(*rec.CompletedAt))
		return rec.CompletedAt.Sub(rec.CreatedAt), nil
	}
	fl := newFloor(b, s)
	floorReq := portal.Request{SystemType: acds.SystemFHIRBasic, PortalURL: s.PortalURL, RecordID: p.ID,
		Credentials: portal.Credentials{Username: creds.Username, Password: creds.Password}}

	// Warm up each path once (connections, page cache, allocator).
	if _, err := plainFetch(ctx, s.Portal, s.PortalURL, p.ID); err != nil {
		b.Fatal(err)
	}
	if _, err := attest(); err != nil {
		b.Fatal(err)
	}
	if err := fl.run(ctx, floorReq); err != nil {
		b.Fatal(err)
	}
	var plain, e2e, serverSide, floor []time.Duration
	size := 0
	ts.reset()
	b.ResetTimer()
	for range b.N {
		t := time.Now()
		n, err := plainFetch(ctx, s.Portal, s.PortalURL, p.ID)
		if err != nil {
			b.Fatal(err)
		}
		plain = append(plain, time.Since(t))
		size = n
		t = time.Now()
		sd, err := attest()
		if err != nil {
			b.Fatal(err)
		}
		e2e = append(e2e, time.Since(t))
		serverSide = append(serverSide, sd)
		t = time.Now()
		if err := fl.run(ctx, floorReq); err != nil {
			b.Fatal(err)
		}
		floor = append(floor, time.Since(t))
	}
	b.StopTimer()
	a, bb, cc, ss := median(plain), median(e2e), median(floor), median(serverSide)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(float64(size), "portal-bytes")
	b.ReportMetric(ms(a), "plain-ms")
	b.ReportMetric(ms(bb), "attested-ms")
	b.ReportMetric(ms(cc), "floor-ms")
	b.ReportMetric(ms(ss), "server-ms")
	b.ReportMetric(ms(median(accept)), "accept-ms")
	b.ReportMetric(ms(median(delivery)), "delivery-ms")
	b.ReportMetric(ms(median(ts.claim)), "store-claim-ms")
	b.ReportMetric(ms(median(ts.complete)), "store-complete-ms")
	b.ReportMetric(ms(median(ts.get)), "store-get-ms")
	b.ReportMetric(float64(bb)/float64(a), "ratio-b/a")
	b.ReportMetric(float64(cc)/float64(a), "ratio-c/a")
	b.ReportMetric(float64(bb)/float64(cc), "ratio-b/c")
}

// timedStore times the store calls of fetch-and-attest that the floor has
// no counterpart for or does once: the claim, the write of the result and
// the read of a completed request.
type timedStore struct {
	store.Store
	mu                   sync.Mutex
	claim, complete, get []time.Duration
}

func (t *timedStore) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.claim, t.complete, t.get = nil, nil, nil
}

func (t *timedStore) add(d *[]time.Duration, since time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	*d = append(*d, time.Since(since))
}

func (t *timedStore) Claim(ctx context.Context, o store.ClaimOptions) (*store.Request, error) {
	start := time.Now()
	r, err := t.Store.Claim(ctx, o)
	if r != nil {
		t.add(&t.claim, start)
	}
	return r, err
}

func (t *timedStore) Complete(ctx context.Context, id, worker string, result []byte, now time.Time) error {
	defer t.add(&t.complete, time.Now())
	return t.Store.Complete(ctx, id, worker, result, now)
}

func (t *timedStore) GetRequest(ctx context.Context, owner, id string) (store.Request, error) {
	start := time.Now()
	r, err := t.Store.GetRequest(ctx, owner, id)
	if r.Status == acds.StatusCompleted {
		t.add(&t.get, start)
	}
	return r, err
}

// floor does the least work of a fetch-and-attest (see
// BenchmarkFetchAndAttest's (c)) with the same components as the server:
// a portal Fetcher through the prover and a notary, fhir.Process, the
// stack's enclave, and an fsynced SQLite commit.
type floor struct {
	fetcher     *portal.Fetcher
	notaryKey   ed25519.PublicKey
	enclave     *attestation.Enclave
	measurement string
	deidKey     []byte
	db          *sql.DB
	n           int
}

func newFloor(b *testing.B, s *stack) *floor {
	n := notarytest.StartNotary(b, notary.Config{Roots: s.Portal.CertPool(), AllowAddr: portal.Guard{AllowPrivate: true}.AllowAddrPort})
	guard := portal.Guard{AllowPrivate: true}
	f := &floor{
		fetcher: &portal.Fetcher{Connector: portal.Connector{Guard: guard},
			NewTransport: portal.Notarized{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key},
				TLSConfig: &tls.Config{RootCAs: s.Portal.CertPool()}, Guard: guard}.Factory()},
		notaryKey:   n.Key,
		enclave:     s.Enclave,
		measurement: hex.EncodeToString(s.Enclave.Measurement()),
		deidKey:     make([]byte, 32),
	}
	if _, err := rand.Read(f.deidKey); err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(b.TempDir(), "floor.db")+
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	var mode string
	var syncLevel int
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		b.Fatalf("floor database journal_mode %q: %v", mode, err)
	}
	if err := db.QueryRow("PRAGMA synchronous").Scan(&syncLevel); err != nil || syncLevel != 2 {
		b.Fatalf("floor database synchronous=%d: %v", syncLevel, err)
	}
	if _, err := db.Exec("CREATE TABLE results (id TEXT PRIMARY KEY, output BLOB NOT NULL, bundle BLOB NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	f.db = db
	return f
}

// run fetches, processes, attests and stores one record.
func (f *floor) run(ctx context.Context, req portal.Request) error {
	res, err := f.fetcher.Fetch(ctx, req)
	if err != nil {
		return err
	}
	now := time.Now()
	out, err := fhir.Process(res.FHIR, fhir.Options{Format: acds.OutputFHIRR4, Source: res.Host, Measurement: f.measurement,
		Now: now, DeidentKey: f.deidKey})
	if err != nil {
		return err
	}
	f.n++
	id := fmt.Sprintf("floor-%d", f.n)
	claims := attestation.Claims{RequestID: id, OutputFormat: acds.OutputFHIRR4, OutputDigest: out.Digest, IssuedAt: now,
		Source: attestation.Source{Kind: acds.SourceMPCTLS}, NotaryKey: f.notaryKey, Coverage: res.Coverage}
	var statements [][]byte
	for _, s := range res.Sessions {
		claims.Source.Sessions = append(claims.Source.Sessions, attestation.Session{RequestLine: res.RequestLines[0], Host: s.Host})
		statements = append(statements, s.Statement)
	}
	bundle, err := f.enclave.Attest(ctx, claims, statements)
	if err != nil {
		return err
	}
	_, err = f.db.ExecContext(ctx, "INSERT INTO results (id, output, bundle) VALUES (?, ?, ?)", id, out.JSON, bundle)
	return err
}

// plainFetch fetches Patient/{id}/$everything with a plain net/http client
// and Basic auth over a fresh TLS connection, following next links, and
// returns the bytes read.
func plainFetch(ctx context.Context, d *demoportal.Portal, base, id string) (int, error) {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: d.CertPool()}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	next := base + "/Patient/" + id + "/$everything"
	total := 0
	for next != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next, nil)
		if err != nil {
			return 0, err
		}
		req.SetBasicAuth(demoportal.Username, demoportal.Password)
		req.Header.Set("Accept", "application/fhir+json")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("%s: %s", next, resp.Status)
		}
		total += len(body)
		var page struct {
			Link []struct {
				Relation string `json:"relation"`
				URL      string `json:"url"`
			} `json:"link"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return 0, err
		}
		next = ""
		for _, l := range page.Link {
			if l.Relation == "next" {
				next = l.URL
			}
		}
	}
	return total, nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
