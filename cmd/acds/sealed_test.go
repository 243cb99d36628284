package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/store"
)

// Recognisable portal credentials: the account of the test portal.
const (
	sealedUser = "USERNAME-okapi-4471-larch"
	sealedPass = "PASSWORD-quince-9038-fjord"
	wrongPass  = "WRONGPASS-heron-2765-basalt"
)

// spyStore records what the server hands the store at acceptance: the
// owner and the sealed blob of each request.
type spyStore struct {
	store.Store
	mu     sync.Mutex
	sealed map[string][]byte
	owner  map[string]string
}

func (s *spyStore) CreateRequest(ctx context.Context, r store.Request) error {
	s.mu.Lock()
	s.sealed[r.ID] = slices.Clone(r.Sealed)
	s.owner[r.ID] = r.Owner
	s.mu.Unlock()
	return s.Store.CreateRequest(ctx, r)
}

// stored returns the sealed column of request id as the store has it now.
func (s *spyStore) stored(t *testing.T, id string) []byte {
	t.Helper()
	s.mu.Lock()
	owner := s.owner[id]
	s.mu.Unlock()
	r, err := s.Store.GetRequest(context.Background(), owner, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return r.Sealed
}

func (s *spyStore) blob(id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sealed[id]
}

// gateFetcher holds each fetch (after the worker claimed the request and
// unsealed the credentials) until the test releases it.
type gateFetcher struct {
	next    server.Fetcher
	entered chan struct{}
	release chan struct{}
}

func (g *gateFetcher) Admit(r portal.Request) error { return g.next.Admit(r) }

func (g *gateFetcher) Fetch(ctx context.Context, r portal.Request) (*portal.Result, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.next.Fetch(ctx, r)
}

// needles are the forms in which a credential could land in a file: as
// is, base64 (a Basic authorization header, or the secret alone), hex,
// and inside the credentials JSON object.
func needles(user, pass string) map[string][]byte {
	basic := user + ":" + pass
	credsJSON, _ := json.Marshal(map[string]string{"username": user, "password": pass}) // the sealed encoding
	return map[string][]byte{
		"username":             []byte(user),
		"password":             []byte(pass),
		"basic base64":         []byte(base64.StdEncoding.EncodeToString([]byte(basic))),
		"password base64":      []byte(base64.StdEncoding.EncodeToString([]byte(pass))),
		"password base64url":   []byte(base64.RawURLEncoding.EncodeToString([]byte(pass))),
		"password hex":         []byte(hex.EncodeToString([]byte(pass))),
		"credentials JSON":     credsJSON,
		"password JSON string": []byte(`"` + pass + `"`),
	}
}

// rawFiles reads every file of the data directory (the SQLite database, its
// -wal and -shm, the disk reserve, the enclave's keys, the notary key) as
// bytes on disk. Write-ahead logs are read before everything else: a
// checkpoint between the reads moves pages from the log into the database
// and then empties the log, so a page is in the log as read or in the
// database read after it — read the other way round, a checkpoint in
// between (while a large file such as the reserve is read) would hide it.
func rawFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			paths = append(paths, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rank := func(p string) int {
		if strings.HasSuffix(p, "-wal") {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(paths, func(a, b string) int { return rank(a) - rank(b) })
	files := map[string][]byte{}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue // the -wal or -shm went away meanwhile
		}
		if err != nil {
			t.Fatal(err)
		}
		files[path] = b
	}
	return files
}

// assertNoCredentials fails when any credential form is in any file.
func assertNoCredentials(t *testing.T, when string, files map[string][]byte, secrets map[string][]byte) {
	t.Helper()
	for path, b := range files {
		for name, n := range secrets {
			if bytes.Contains(b, n) {
				t.Errorf("%s: the %s is in %s", when, name, filepath.Base(path))
			}
		}
	}
}

func containsIn(files map[string][]byte, n []byte) []string {
	var in []string
	for path, b := range files {
		if bytes.Contains(b, n) {
			in = append(in, filepath.Base(path))
		}
	}
	slices.Sort(in)
	return in
}

// eventuallyGone waits (the store truncates its WAL once writes pause)
// until blob is in no file of dir.
func eventuallyGone(t *testing.T, when, dir string, blob []byte) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		in := containsIn(rawFiles(t, dir), blob)
		if len(in) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: the sealed blob is still at rest in %v", when, in)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSealedCredentialsAtRest runs fetch-and-attest against the real
// SQLite store with recognisable credentials and reads the raw database
// files (main db, -wal, -shm) and every other file in the data directory:
// at acceptance (the worker holds the request, the fetch not started),
// after completion and after a failed login, no form of the credentials is
// on disk, while the sealed blob is (a positive control that the files
// read are the ones written). The sealed blob is erased from the store and
// from the files when the fetch ends, and, for a request no worker took,
// when the credential TTL passes.
func TestSealedCredentialsAtRest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	secrets := needles(sealedUser, sealedPass)
	for k, v := range needles(sealedUser, wrongPass) {
		secrets["wrong "+k] = v
	}

	var spy *spyStore
	gate := &gateFetcher{entered: make(chan struct{}), release: make(chan struct{})}
	s, err := startStack(ctx, stackOptions{Dir: dir, Patients: 2, Seed: 3, Username: sealedUser, Password: sealedPass,
		Tune: func(c *server.Config) {
			spy = &spyStore{Store: c.Store, sealed: map[string][]byte{}, owner: map[string]string{}}
			c.Store = spy
			gate.next = c.Fetcher
			c.Fetcher = gate
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := client.New(s.BaseURL, &client.Options{PollInterval: 20 * time.Millisecond})
	sess, err := c.Anon(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(sess.Token)
	patient := s.Portal.Patients()[0].ID

	fetch := func(pass string) string {
		t.Helper()
		acc, err := c.FetchAndAttest(ctx, acds.FetchAndAttestRequest{SystemType: acds.SystemFHIRBasic, PortalURL: s.PortalURL,
			RecordID: patient, Username: sealedUser, Password: pass, OutputFormat: acds.OutputFHIRR4})
		if err != nil {
			t.Fatal(err)
		}
		return acc.RequestID
	}

	// 1. Accepted, claimed, held before the fetch.
	id := fetch(sealedPass)
	select {
	case <-gate.entered:
	case <-ctx.Done():
		t.Fatal("the worker never started the fetch")
	}
	blob := spy.blob(id)
	if len(blob) == 0 || !bytes.Equal(spy.stored(t, id), blob) {
		t.Fatalf("the request is not stored with its sealed credentials (%d bytes)", len(blob))
	}
	files := rawFiles(t, dataDir)
	for _, name := range []string{"acds.db", "acds.db-wal", "acds.db-shm"} {
		if _, ok := files[filepath.Join(dataDir, name)]; !ok {
			t.Errorf("%s not found among %d files: the test would not read the database", name, len(files))
		}
	}
	if in := containsIn(files, blob); len(in) == 0 {
		t.Error("the sealed blob is in no file while the request is queued: the raw read does not see the store")
	}
	assertNoCredentials(t, "at acceptance", files, secrets)

	// 2. Completed: the blob is erased from the row and from the files.
	gate.release <- struct{}{}
	rec, err := c.Wait(ctx, id)
	if err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("fetch: %+v %v", rec, err)
	}
	if got := spy.stored(t, id); len(got) != 0 {
		t.Errorf("completed request still has %d sealed bytes", len(got))
	}
	eventuallyGone(t, "after completion", dataDir, blob)
	assertNoCredentials(t, "after completion", rawFiles(t, dataDir), secrets)

	// 3. Failed (wrong password at the portal): the same.
	id = fetch(wrongPass)
	<-gate.entered
	blob = spy.blob(id)
	assertNoCredentials(t, "wrong password, at acceptance", rawFiles(t, dataDir), secrets)
	gate.release <- struct{}{}
	rec, err = c.Wait(ctx, id)
	if !errors.Is(err, acds.ErrPortalAuthFailed) || rec.Status != acds.StatusFailed || rec.Error.Code() != acds.ProblemPortalAuthFailed {
		t.Fatalf("wrong password: %+v %v", rec, err)
	}
	if got := spy.stored(t, id); len(got) != 0 {
		t.Errorf("failed request still has %d sealed bytes", len(got))
	}
	eventuallyGone(t, "after failure", dataDir, blob)
	assertNoCredentials(t, "after failure", rawFiles(t, dataDir), secrets)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	assertNoCredentials(t, "after shutdown", rawFiles(t, dataDir), secrets)

	// 4. TTL: accepted by a server without workers (another replica would
	// process), then nobody takes it; a server started after the credential
	// TTL erases the blob before any worker may claim the request.
	s2, err := startStack(ctx, stackOptions{Dir: dir, Patients: 2, Seed: 3, Username: sealedUser, Password: sealedPass,
		Tune: func(c *server.Config) {
			spy = &spyStore{Store: c.Store, sealed: map[string][]byte{}, owner: map[string]string{}}
			c.Store = spy
			c.Workers = -1
		}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ = client.New(s2.BaseURL, &client.Options{PollInterval: 20 * time.Millisecond, Token: sess.Token})
	id = fetch(sealedPass)
	blob = spy.blob(id)
	owner := spy.owner[id]
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	files = rawFiles(t, dataDir)
	if in := containsIn(files, blob); len(in) == 0 {
		t.Error("the queued request's sealed blob is in no file after shutdown")
	}
	assertNoCredentials(t, "queued, server stopped", files, secrets)

	later := time.Now().Add(server.DefaultCredentialTTL + time.Minute)
	s3, err := startStack(ctx, stackOptions{Dir: dir, Patients: 2, Seed: 3, Username: sealedUser, Password: sealedPass,
		Tune: func(c *server.Config) {
			spy = &spyStore{Store: c.Store, sealed: map[string][]byte{}, owner: map[string]string{id: owner}}
			c.Store = spy
			c.Now = func() time.Time { return later }
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	c, _ = client.New(s3.BaseURL, &client.Options{PollInterval: 20 * time.Millisecond, Token: sess.Token})
	rec, err = c.Wait(ctx, id)
	if !errors.Is(err, acds.ErrUnavailable) || rec.Status != acds.StatusFailed || rec.Error.Code() != acds.ProblemUnavailable {
		t.Fatalf("after the TTL: %+v %+v %v", rec, rec.Error, err)
	}
	if got := spy.stored(t, id); len(got) != 0 {
		t.Errorf("expired request still has %d sealed bytes", len(got))
	}
	eventuallyGone(t, "after the TTL", dataDir, blob)
	if err := s3.Close(); err != nil {
		t.Fatal(err)
	}
	files = rawFiles(t, dataDir)
	if in := containsIn(files, blob); len(in) != 0 {
		t.Errorf("after the TTL and shutdown, the sealed blob is in %v", in)
	}
	assertNoCredentials(t, "at the end", files, secrets)
}
