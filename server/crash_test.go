package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/store"
)

// The crash tests run this test binary again as a child process that
// serves the API (TestCrashChild) on a store both share. The child
// processes bundles by their id: "bomb" waits until two other attempts
// are in flight beside it (one second at most) and then kills its own
// process with SIGKILL, as a request that exhausts memory would have it
// killed; any other id takes crashChildWork and completes. The child
// prints "ready URL", and "start ID" and "end ID" around each attempt.
const (
	crashChildEnv   = "ACDS_CRASH_CHILD"     // "sqlite:PATH" or "postgres:DSN"
	crashChildLease = 400 * time.Millisecond // short, so that the test waits little for leases to run out
	crashChildWork  = 700 * time.Millisecond
)

func TestCrashChild(t *testing.T) {
	where := os.Getenv(crashChildEnv)
	if where == "" {
		t.Skip("the child process of the crash tests")
	}
	ctx := context.Background()
	var st store.Store
	var err error
	switch kind, arg, _ := strings.Cut(where, ":"); kind {
	case "sqlite":
		st, err = sqlstore.OpenSQLite(ctx, arg)
	case "postgres":
		st, err = sqlstore.OpenPostgres(ctx, arg)
	default:
		err = fmt.Errorf("bad %s %q", crashChildEnv, where)
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var inflight atomic.Int32
	pipeline := &servertest.Pipeline{Hook: func(ctx context.Context, in []byte) error {
		var b struct{ ID string }
		_ = json.Unmarshal(in, &b)
		fmt.Println("start", b.ID)
		if b.ID == "bomb" {
			for deadline := time.Now().Add(time.Second); inflight.Load() < 2 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		inflight.Add(1)
		defer inflight.Add(-1)
		select {
		case <-time.After(crashChildWork):
		case <-ctx.Done():
			return ctx.Err()
		}
		fmt.Println("end", b.ID)
		return nil
	}}
	srv, err := server.New(server.Config{
		Store: st, Pipeline: pipeline, Enclave: servertest.NewEnclave(), Verifier: servertest.Verifier{},
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, nil)),
		RateLimit: -1, Workers: 4, Lease: crashChildLease, PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("ready", "http://"+ln.Addr().String())
	_ = http.Serve(ln, srv.Handler())
}

// crashChild is one child process and the lines it prints.
type crashChild struct {
	cmd   *exec.Cmd
	lines chan string // closed when its stdout ends (the process died)
	base  string
}

func startCrashChild(t *testing.T, where string) *crashChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+where)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &crashChild{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	select {
	case l, ok := <-c.lines:
		if !ok || !strings.HasPrefix(l, "ready ") {
			_ = cmd.Process.Kill()
			t.Fatalf("the child said %q instead of its ready line", l)
		}
		c.base = strings.TrimPrefix(l, "ready ")
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child printed no ready line")
	}
	return c
}

// testKilledProcess: a request whose attempt kills the process (kill -9)
// while two others are in flight is retried once, alone, kills the
// process again and ends failed; the two others are retried alone too and
// complete, charged one attempt each.
func testKilledProcess(t *testing.T, where string, open func() store.Store) {
	hc := &http.Client{Timeout: 5 * time.Second}
	call := func(base, method, path, token, body string) (int, []byte, error) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	child := startCrashChild(t, where)
	t.Cleanup(func() { _ = child.cmd.Process.Kill(); _ = child.cmd.Wait() })

	code, b, err := call(child.base, "POST", "/v1/auth/anon", "", "{}")
	if err != nil || code != http.StatusCreated {
		t.Fatalf("anon: %d %s %v", code, b, err)
	}
	session := decode[acds.Session](t, b)
	token := session.Token
	ids := map[string]string{} // bundle id → request id
	for _, name := range []string{"bomb", "innocent-1", "innocent-2"} {
		code, b, err := call(child.base, "POST", "/v1/process", token,
			`{"data":{"resourceType":"Bundle","id":"`+name+`","type":"collection"},"outputFormat":"fhir_r4"}`)
		if err != nil || code != http.StatusAccepted {
			t.Fatalf("process %s: %d %s %v", name, code, b, err)
		}
		ids[name] = decode[acds.Accepted](t, b).RequestID
	}

	// Follow the children: each that dies is replaced, until every request
	// has ended.
	starts := map[string]int{}     // bundle id → attempts started
	var alone []bool               // for each start of the bomb: no other attempt was running in its process
	var inFlightAtCrash [][]string // for each death: the attempts that were running
	running := map[string]bool{}   // attempts running in the current child
	ended := map[string]acds.Request{}
	deadline := time.After(90 * time.Second)
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for len(ended) < len(ids) {
		select {
		case l, ok := <-child.lines:
			if !ok { // the child died
				_ = child.cmd.Wait()
				var was []string
				for id := range running {
					was = append(was, id)
				}
				inFlightAtCrash = append(inFlightAtCrash, was)
				running = map[string]bool{}
				if len(inFlightAtCrash) > 4 {
					t.Fatalf("the process died %d times: a crash loop (in flight: %v)", len(inFlightAtCrash), inFlightAtCrash)
				}
				child = startCrashChild(t, where)
				continue
			}
			verb, id, _ := strings.Cut(l, " ")
			switch verb {
			case "start":
				if id == "bomb" {
					alone = append(alone, len(running) == 0)
				}
				starts[id]++
				running[id] = true
			case "end":
				delete(running, id)
			}
		case <-poll.C:
			for name, id := range ids {
				if _, done := ended[name]; done {
					continue
				}
				code, b, err := call(child.base, "GET", "/v1/requests/"+id, token, "")
				if err != nil || code != http.StatusOK {
					continue // the child may be dying
				}
				if r := decode[acds.Request](t, b); r.Status != acds.StatusProcessing {
					ended[name] = r
				}
			}
		case <-deadline:
			t.Fatalf("requests still processing after 90 s: ended %v, attempts %v, deaths %v", ended, starts, inFlightAtCrash)
		}
	}
	_ = child.cmd.Process.Kill()
	_ = child.cmd.Wait()

	if len(inFlightAtCrash) != 2 {
		t.Errorf("the process died %d times, want 2 (the attempt and its retry alone): %v", len(inFlightAtCrash), inFlightAtCrash)
	}
	if len(inFlightAtCrash) > 0 && len(inFlightAtCrash[0]) != 3 {
		t.Errorf("at the first death %v were running, want the bomb and both innocents", inFlightAtCrash[0])
	}
	if len(inFlightAtCrash) > 1 && (len(inFlightAtCrash[1]) != 1 || inFlightAtCrash[1][0] != "bomb") {
		t.Errorf("at the second death %v were running, want the bomb alone", inFlightAtCrash[1])
	}
	if starts["bomb"] != 2 || len(alone) != 2 || !alone[1] {
		t.Errorf("the bomb started %d times (alone: %v), want twice, the second time alone", starts["bomb"], alone)
	}
	bomb := ended["bomb"]
	if bomb.Status != acds.StatusFailed || bomb.Error == nil || bomb.Error.Code() != acds.ProblemInternal ||
		!strings.Contains(bomb.Error.Detail, "processing could not complete") {
		t.Errorf("the bomb ended %s with %+v, want failed: processing could not complete", bomb.Status, bomb.Error)
	}
	st := open()
	defer st.Close()
	ctx := context.Background()
	for _, name := range []string{"innocent-1", "innocent-2", "bomb"} {
		if r := ended[name]; name != "bomb" && r.Status != acds.StatusCompleted {
			t.Errorf("%s ended %s (%+v), want completed", name, r.Status, r.Error)
		}
		row, err := st.GetRequest(ctx, session.Pseudonym, ids[name])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d attempts started, %d charged, ended %s", name, starts[name], row.Attempts, row.Status)
		if starts[name] > 2 || row.Attempts != 1 {
			t.Errorf("%s: %d attempts started and %d charged, want at most 2 started and 1 charged", name, starts[name], row.Attempts)
		}
	}
	t.Logf("deaths: %d; attempts running at each: %v", len(inFlightAtCrash), inFlightAtCrash)
}

func TestKilledProcessSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acds.db")
	testKilledProcess(t, "sqlite:"+path, func() store.Store { return openSQLite(t, path) })
}

func TestKilledProcessPostgres(t *testing.T) {
	dsn := postgresDSN(t)
	testKilledProcess(t, "postgres:"+dsn, func() store.Store {
		st, err := sqlstore.OpenPostgres(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}
