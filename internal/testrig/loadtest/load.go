// Package loadtest drives built `acds serve` processes with mixed traffic
// from many clients while faults happen — SIGKILL and restart, a paused or
// dropped database link — and accounts for every request: what was
// answered with which status, how fast, and whether every accepted
// request ended exactly once. It is the repository's load and fault
// suite; its tests are behind the build tag "load":
//
//	go test -tags load -v ./internal/testrig/loadtest/
//	ACDS_LOAD_DURATION=10s ACDS_LOAD_CLIENTS=16 go test -tags load ./internal/testrig/loadtest/   # CI's short run
//
// Clients talk to loopback only, each from its own 127.0.0.x address so
// that the server's per-address limits treat them as the distinct clients
// they stand for.
package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Targets is where the clients send traffic: one base URL per replica,
// read on every request (a restarted replica has a new URL).
type Targets struct {
	mu   sync.RWMutex
	urls []string
}

// NewTargets returns Targets for urls.
func NewTargets(urls ...string) *Targets { return &Targets{urls: urls} }

// Set replaces the URL of replica i.
func (t *Targets) Set(i int, url string) {
	t.mu.Lock()
	t.urls[i] = url
	t.mu.Unlock()
}

func (t *Targets) pick(r *rand.Rand) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.urls[r.IntN(len(t.urls))]
}

// Fetch, when set, lets clients send POST /v1/fetch-and-attest to a portal.
type Fetch struct {
	PortalURL, Username, Password, RecordID string
}

// Config is one run.
type Config struct {
	Targets  *Targets
	Clients  int           // concurrent clients
	Duration time.Duration // how long they send
	Fetch    *Fetch        // nil: no fetch-and-attest traffic
	// Drain bounds the wait, after the traffic, for every accepted
	// request to end.
	Drain time.Duration
}

// Report is what a run saw.
type Report struct {
	Sent     int64
	ByStatus map[int]int64 // HTTP status -> count
	Bad5xx   int64         // 5xx other than 503 with Retry-After
	ConnErrs int64         // requests that got no answer (a killed replica)
	Accepted int           // requests answered 202
	Deleted  int           // of those, deleted by their client
	// Unconfirmed: deleted by a DELETE whose answer never came (or was
	// 503): found gone afterwards, which is that DELETE's doing, not a loss.
	Unconfirmed int
	Completed   int
	Failed      int
	Lost        int // accepted requests that did not end, or vanished
	Problems    map[string]int
	P50, P99    time.Duration // of answered requests
	Elapsed     time.Duration
	Notes       []string
}

// String renders the report as a few lines.
func (r *Report) String() string {
	var b strings.Builder
	codes := make([]int, 0, len(r.ByStatus))
	for c := range r.ByStatus {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	fmt.Fprintf(&b, "sent %d in %v (%.0f req/s), p50 %v, p99 %v, no answer %d\n", r.Sent, r.Elapsed.Round(time.Millisecond),
		float64(r.Sent)/r.Elapsed.Seconds(), r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.ConnErrs)
	b.WriteString("status:")
	for _, c := range codes {
		fmt.Fprintf(&b, " %d×%d", c, r.ByStatus[c])
	}
	fmt.Fprintf(&b, "\naccepted %d: completed %d, failed %d, deleted %d (+%d by a DELETE whose answer was lost), lost %d; 5xx other than 503+Retry-After: %d\n",
		r.Accepted, r.Completed, r.Failed, r.Deleted, r.Unconfirmed, r.Lost, r.Bad5xx)
	if len(r.Problems) > 0 {
		fmt.Fprintf(&b, "failed with: %v\n", r.Problems)
	}
	for _, n := range r.Notes {
		b.WriteString(n + "\n")
	}
	return b.String()
}

// accepted is a request a 202 promised to end.
type accepted struct {
	id, token string
	deleted   bool // its DELETE was answered 204 or 404
	// deleteTried: a DELETE was sent without a definite answer (no answer,
	// or 503 while the database was unreachable): the row may be gone, as
	// with any write whose outcome the client never learned.
	deleteTried bool
}

type run struct {
	cfg      Config
	sent     atomic.Int64
	bad5xx   atomic.Int64
	connErrs atomic.Int64

	mu       sync.Mutex
	byStatus map[int]int64
	lat      []time.Duration
	accepted map[string]*accepted
	bundles  []string // attestation bundles of completed requests, for verify
	notes    []string
}

// Run sends mixed traffic from cfg.Clients clients for cfg.Duration, then
// waits for every accepted request to end and reports. ctx ends it early.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Clients < 1 || cfg.Clients > 250 {
		return nil, fmt.Errorf("loadtest: %d clients; want 1 to 250 (one loopback address each)", cfg.Clients)
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 3 * time.Minute
	}
	r := &run{cfg: cfg, byStatus: map[int]int64{}, accepted: map[string]*accepted{}}
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.client(tctx, i)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	rep := r.drain(ctx)
	rep.Elapsed = elapsed
	return rep, nil
}

// httpClient returns a client whose connections come from 127.0.0.(i+2).
func httpClient(i int) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, byte((i+2)/250), byte((i+2)%250+1))}}
	return &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4,
			ResponseHeaderTimeout: 60 * time.Second},
	}
}

// answer is one exchange.
type answer struct {
	status     int
	retryAfter string
	body       []byte
}

func (r *run) do(ctx context.Context, hc *http.Client, method, url, token string, body []byte) (*answer, bool) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, false
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	t0 := time.Now()
	resp, err := hc.Do(req)
	if ctx.Err() != nil {
		return nil, false // the run ended: not counted
	}
	r.sent.Add(1)
	if err != nil {
		r.connErrs.Add(1)
		return nil, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		r.connErrs.Add(1)
		return nil, false
	}
	d := time.Since(t0)
	a := &answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: b}
	r.mu.Lock()
	r.byStatus[a.status]++
	r.lat = append(r.lat, d)
	r.mu.Unlock()
	if a.status >= 500 && !(a.status == http.StatusServiceUnavailable && a.retryAfter != "") {
		r.bad5xx.Add(1)
		r.note(fmt.Sprintf("%s %s → %d %s", method, strings.SplitN(url, "/v1/", 2)[len(strings.SplitN(url, "/v1/", 2))-1], a.status, truncate(b)))
	}
	return a, true
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func (r *run) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.notes) < 20 {
		r.notes = append(r.notes, s)
	}
}

// client is one client's loop: a token, then a random mix of requests.
func (r *run) client(ctx context.Context, i int) {
	hc := httpClient(i)
	defer hc.CloseIdleConnections()
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	token := ""
	var mine []string // ids this client was accepted
	valid := []byte(`{"data":` + string(Bundle20KB(i)) + `,"outputFormat":"fhir_r4"}`)
	invalid := []byte(`{"data":{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","gender":"robot"}}]},"outputFormat":"fhir_r4"}`)
	for ctx.Err() == nil {
		base := r.cfg.Targets.pick(rng)
		if token == "" {
			a, ok := r.do(ctx, hc, "POST", base+"/v1/auth/anon", "", []byte(`{}`))
			if ok && a.status == http.StatusCreated {
				var s struct{ Token string }
				_ = json.Unmarshal(a.body, &s)
				token = s.Token
			} else {
				backoff(ctx, a)
			}
			continue
		}
		switch x := rng.IntN(100); {
		case x < 40: // process a valid 20 KB bundle
			a, ok := r.do(ctx, hc, "POST", base+"/v1/process", token, valid)
			if ok && a.status == http.StatusAccepted {
				mine = append(mine, r.accept(a, token))
			} else {
				backoff(ctx, a)
			}
		case x < 45: // invalid FHIR: refused at once
			a, _ := r.do(ctx, hc, "POST", base+"/v1/process", token, invalid)
			backoff(ctx, a)
		case x < 50 && r.cfg.Fetch != nil:
			f := r.cfg.Fetch
			body, _ := json.Marshal(map[string]string{"systemType": "demo", "portalUrl": f.PortalURL,
				"username": f.Username, "password": f.Password, "recordId": f.RecordID})
			a, ok := r.do(ctx, hc, "POST", base+"/v1/fetch-and-attest", token, body)
			if ok && a.status == http.StatusAccepted {
				mine = append(mine, r.accept(a, token))
			} else {
				backoff(ctx, a)
			}
		case x < 75 && len(mine) > 0: // read one of mine
			id := mine[rng.IntN(len(mine))]
			a, ok := r.do(ctx, hc, "GET", base+"/v1/requests/"+id, token, nil)
			if ok && a.status == http.StatusOK {
				r.keepBundle(a.body)
			}
			backoff(ctx, a)
		case x < 85:
			a, _ := r.do(ctx, hc, "GET", base+"/v1/requests?limit=20", token, nil)
			backoff(ctx, a)
		case x < 90:
			a, _ := r.do(ctx, hc, "GET", base+"/v1/health", "", nil)
			backoff(ctx, a)
		case x < 95:
			if b := r.someBundle(rng); b != "" {
				body, _ := json.Marshal(map[string]string{"attestationBundle": b})
				a, _ := r.do(ctx, hc, "POST", base+"/v1/verify", "", body)
				backoff(ctx, a)
			}
		case x < 97 && len(mine) > 0: // delete one of mine
			j := rng.IntN(len(mine))
			id := mine[j]
			a, ok := r.do(ctx, hc, "DELETE", base+"/v1/requests/"+id, token, nil)
			r.mu.Lock()
			if ok && (a.status == http.StatusNoContent || a.status == http.StatusNotFound) {
				r.accepted[id].deleted = true
				mine = slices.Delete(mine, j, j+1)
			} else if !ok || a.status >= 500 {
				r.accepted[id].deleteTried = true
			}
			r.mu.Unlock()
			backoff(ctx, a)
		default:
			a, _ := r.do(ctx, hc, "GET", base+"/v1/attestation", "", nil)
			backoff(ctx, a)
		}
	}
}

// backoff waits as a well-behaved client does after 429 or 503 (the
// Retry-After, at most 2 s), or briefly after no answer.
func backoff(ctx context.Context, a *answer) {
	var d time.Duration
	switch {
	case a == nil:
		d = 100 * time.Millisecond
	case a.status == http.StatusTooManyRequests || a.status == http.StatusServiceUnavailable:
		d = time.Second
		if n, err := time.ParseDuration(a.retryAfter + "s"); err == nil {
			d = min(n, 2*time.Second)
		}
	default:
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (r *run) accept(a *answer, token string) string {
	var acc struct{ RequestID string }
	_ = json.Unmarshal(a.body, &acc)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.accepted[acc.RequestID]; dup {
		r.notes = append(r.notes, "duplicate request id "+acc.RequestID)
	}
	r.accepted[acc.RequestID] = &accepted{id: acc.RequestID, token: token}
	return acc.RequestID
}

func (r *run) keepBundle(body []byte) {
	var rec struct {
		Result *struct{ AttestationBundle string } `json:"result"`
	}
	if json.Unmarshal(body, &rec) != nil || rec.Result == nil || rec.Result.AttestationBundle == "" {
		return
	}
	r.mu.Lock()
	if len(r.bundles) < 64 {
		r.bundles = append(r.bundles, rec.Result.AttestationBundle)
	}
	r.mu.Unlock()
}

func (r *run) someBundle(rng *rand.Rand) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bundles) == 0 {
		return ""
	}
	return r.bundles[rng.IntN(len(r.bundles))]
}

// drain waits for every accepted, undeleted request to end, and counts.
func (r *run) drain(ctx context.Context) *Report {
	rep := &Report{Sent: r.sent.Load(), ConnErrs: r.connErrs.Load(), Problems: map[string]int{}}
	r.mu.Lock()
	rep.ByStatus = maps(r.byStatus)
	lat := slices.Clone(r.lat)
	var todo []*accepted
	for _, a := range r.accepted {
		if a.deleted {
			rep.Deleted++
		} else {
			todo = append(todo, a)
		}
	}
	rep.Accepted = len(r.accepted)
	r.mu.Unlock()
	slices.Sort(lat)
	if len(lat) > 0 {
		rep.P50, rep.P99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	dctx, cancel := context.WithTimeout(ctx, r.cfg.Drain)
	defer cancel()
	hc := httpClient(r.cfg.Clients + 1)
	defer hc.CloseIdleConnections()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, a := range todo {
		for {
			base := r.cfg.Targets.pick(rng)
			req, _ := http.NewRequestWithContext(dctx, "GET", base+"/v1/requests/"+a.id+"?wait=10", nil)
			req.Header.Set("Authorization", "Bearer "+a.token)
			resp, err := hc.Do(req)
			if dctx.Err() != nil {
				rep.Lost++
				rep.Notes = append(rep.Notes, "did not end in time: "+a.id)
				break
			}
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests {
				time.Sleep(time.Second)
				continue
			}
			if resp.StatusCode == http.StatusNotFound && a.deleteTried {
				rep.Unconfirmed++
				break
			}
			if resp.StatusCode != http.StatusOK {
				rep.Lost++
				rep.Notes = append(rep.Notes, fmt.Sprintf("accepted %s, now %d %s", a.id, resp.StatusCode, truncate(b)))
				break
			}
			var rec struct {
				Status string
				Error  *struct{ Type string }
			}
			_ = json.Unmarshal(b, &rec)
			if rec.Status == "completed" {
				rep.Completed++
				break
			}
			if rec.Status == "failed" {
				rep.Failed++
				if rec.Error != nil {
					rep.Problems[strings.TrimPrefix(rec.Error.Type, "urn:acds:problem:")]++
				}
				break
			}
		}
	}
	rep.Bad5xx = r.bad5xx.Load()
	r.mu.Lock()
	rep.Notes = append(rep.Notes, r.notes...)
	r.mu.Unlock()
	return rep
}

func maps(m map[int]int64) map[int]int64 {
	out := make(map[int]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Bundle20KB returns a valid FHIR R4 collection Bundle of about 20 KB: a
// patient and vital-sign observations, distinct per seed.
func Bundle20KB(seed int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:00000000-0000-4000-8000-%012d","resource":{"resourceType":"Patient","id":"p%d","name":[{"family":"Load","given":["Client%d"]}],"gender":"female","birthDate":"1970-01-01"}}`, seed, seed, seed)
	for i := 0; b.Len() < 20<<10; i++ {
		fmt.Fprintf(&b, `,{"fullUrl":"urn:uuid:00000000-0000-4000-9000-%06d%06d","resource":{"resourceType":"Observation","id":"o%d-%d","status":"final","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"vital-signs"}]}],"code":{"coding":[{"system":"http://loinc.org","code":"8867-4","display":"Heart rate"}]},"subject":{"reference":"urn:uuid:00000000-0000-4000-8000-%012d"},"effectiveDateTime":"2024-03-%02dT10:00:00Z","valueQuantity":{"value":%d,"unit":"/min","system":"http://unitsofmeasure.org","code":"/min"}}}`,
			seed%1000000, i, seed, i, seed, i%28+1, 60+i%40)
	}
	b.WriteString("]}")
	return []byte(b.String())
}
