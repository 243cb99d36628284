//go:build load

package loadtest_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/internal/testrig/loadtest"
	"github.com/acds-project/acds/internal/testrig/pgtest"
)

// Settings from the environment: ACDS_LOAD_DURATION (60s) and
// ACDS_LOAD_CLIENTS (64).
func settings(t *testing.T) (time.Duration, int) {
	d, n := 60*time.Second, 64
	if v := os.Getenv("ACDS_LOAD_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("ACDS_LOAD_DURATION: %v", err)
		}
	}
	if v := os.Getenv("ACDS_LOAD_CLIENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("ACDS_LOAD_CLIENTS: %v", err)
		}
	}
	return d, n
}

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acds-load-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, err = loadtest.Build(context.Background(), "../../..", dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// portal starts `acds portal` and returns what clients need to fetch from
// it, and the CA file acds serve must trust.
func portal(t *testing.T) (*loadtest.Fetch, string) {
	t.Helper()
	dir := t.TempDir()
	ca := filepath.Join(dir, "portal-ca.pem")
	p, err := loadtest.Start(context.Background(), binary, filepath.Join(dir, "portal.err"),
		regexp.MustCompile(`^acds portal listening on `), "portal", "--addr", "127.0.0.1:0", "--ca-out", ca, "--patients", "2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	// The portal prints its base URL, demo credentials and patients after
	// the ready line too; read them from what it printed so far, waiting
	// a moment for the rest.
	f := &loadtest.Fetch{}
	creds := regexp.MustCompile(`^demo credentials: username "([^"]*)" password "([^"]*)"`)
	for _, l := range p.Stdout {
		if u, ok := strings.CutPrefix(l, "FHIR base URL: "); ok {
			f.PortalURL = u
		}
		if m := creds.FindStringSubmatch(l); m != nil {
			f.Username, f.Password = m[1], m[2]
		}
		if rest, ok := strings.CutPrefix(l, "patient "); ok && f.RecordID == "" {
			f.RecordID, _, _ = strings.Cut(rest, " ")
		}
	}
	if f.PortalURL == "" || f.Username == "" || f.RecordID == "" {
		t.Skipf("could not read the portal's URL, credentials and a patient from %q (fetch traffic off)", p.Stdout)
	}
	return f, ca
}

// pgSchema makes a fresh schema in ACDS_TEST_POSTGRES (package pgtest)
// and returns a DSN using it through hostport (the database itself, or a
// proxy to it), and the database's own host:port.
func pgSchema(t *testing.T) (dsn func(hostport string) string, dbHostPort string) {
	t.Helper()
	if v := os.Getenv(pgtest.Env); v != "" && !strings.HasPrefix(v, "postgres://") && !strings.HasPrefix(v, "postgresql://") {
		t.Skip("ACDS_TEST_POSTGRES is not a postgres:// URL, which --store needs")
	}
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	return func(hostport string) string {
		v := *u
		v.Host = hostport
		return v.String()
	}, u.Host
}

func serve(t *testing.T, args ...string) *loadtest.Proc {
	t.Helper()
	dir := t.TempDir()
	p, err := loadtest.StartServe(context.Background(), binary, filepath.Join(dir, "serve.err"),
		append([]string{"--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--rate-limit", "0", "--workers", "8"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// check fails the test on a 5xx other than 503 with Retry-After, or on a
// request that was accepted and did not end.
func check(t *testing.T, name string, rep *loadtest.Report, procs ...*loadtest.Proc) {
	t.Helper()
	var rss []string
	for _, p := range procs {
		rss = append(rss, fmt.Sprintf("%.0f MB", float64(p.PeakRSS())/(1<<20)))
	}
	t.Logf("%s:\n%speak RSS: %s", name, rep, strings.Join(rss, ", "))
	fmt.Printf("LOAD %s: %.0f req/s, p50 %v, p99 %v, accepted %d, lost %d, bad 5xx %d, peak RSS %s\n", name,
		float64(rep.Sent)/rep.Elapsed.Seconds(), rep.P50, rep.P99, rep.Accepted, rep.Lost, rep.Bad5xx, strings.Join(rss, ", "))
	if rep.Bad5xx != 0 {
		t.Errorf("%d answers were 5xx other than 503 with Retry-After", rep.Bad5xx)
	}
	if rep.Lost != 0 {
		t.Errorf("%d accepted requests were lost", rep.Lost)
	}
	if rep.Accepted == 0 || rep.Completed == 0 {
		t.Errorf("nothing was accepted and completed: the run proves nothing")
	}
}

// TestLoadSQLite: one replica on SQLite under mixed traffic (fetches from
// a demo portal included), killed with SIGKILL half-way and restarted on
// the same data directory.
func TestLoadSQLite(t *testing.T) {
	d, n := settings(t)
	fetch, ca := portal(t)
	p := serve(t, "--portal-ca", ca, "--allow-private-portals")
	targets := loadtest.NewTargets(p.URL)
	go func() {
		time.Sleep(d / 2)
		p.Kill9()
		if err := p.Restart(context.Background()); err != nil {
			t.Error(err)
			return
		}
		targets.Set(0, p.URL)
	}()
	rep, err := loadtest.Run(context.Background(), loadtest.Config{Targets: targets, Clients: n, Duration: d, Fetch: fetch})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "sqlite, kill -9 half-way", rep, p)
}

// TestLoadPostgres: one replica on PostgreSQL through a proxy that
// black-holes the link for 5 s at a third of the run and drops every
// connection at two thirds.
func TestLoadPostgres(t *testing.T) {
	d, n := settings(t)
	dsn, db := pgSchema(t)
	proxy, err := loadtest.NewProxy(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	p := serve(t, "--store", dsn(proxy.Addr()))
	go func() {
		time.Sleep(d / 3)
		proxy.Pause()
		time.Sleep(5 * time.Second)
		proxy.Resume()
		time.Sleep(d / 3)
		proxy.Drop()
	}()
	rep, err := loadtest.Run(context.Background(), loadtest.Config{Targets: loadtest.NewTargets(p.URL), Clients: n, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "postgres, paused 5 s then dropped", rep, p)
}

// TestLoadTwoReplicas: two replicas on one PostgreSQL, traffic spread over
// both, one killed with SIGKILL half-way and restarted.
func TestLoadTwoReplicas(t *testing.T) {
	d, n := settings(t)
	dsn, db := pgSchema(t)
	a := serve(t, "--store", dsn(db))
	b := serve(t, "--store", dsn(db))
	targets := loadtest.NewTargets(a.URL, b.URL)
	go func() {
		time.Sleep(d / 2)
		b.Kill9()
		if err := b.Restart(context.Background()); err != nil {
			t.Error(err)
			return
		}
		targets.Set(1, b.URL)
	}()
	rep, err := loadtest.Run(context.Background(), loadtest.Config{Targets: targets, Clients: n, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "two replicas on postgres, one kill -9", rep, a, b)
}
