package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/service"
	"github.com/acds-project/acds/store"
)

// TestBackupOfARunningInstallationRestores backs up an installation while
// it accepts requests, starts a fresh data directory made of the backup
// alone, and finds the session, the requests and their results there, the
// store at its mark, and the installation working as the same one (the
// same de-identification pseudonyms, replica id). Putting only the
// backup's database back under the original data directory, whose mark
// is newer, is refused as a loss. The simulated chip lives outside the
// data directory here, as hardware does.
func TestBackupOfARunningInstallationRestores(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	machine := t.TempDir()
	backend, err := sim.NewBackend(machine, sim.Options{RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	svc1, c1 := open(t, service.Options{DataDir: dir, Enclave: backend})
	c1, token := session(t, ctx, c1)
	var before []*acds.Request
	for range 4 {
		before = append(before, process(t, ctx, c1, acds.OutputFHIRR4Deidentified))
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var accepted atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c1.Process(ctx, acds.ProcessRequest{Data: json.RawMessage(sampleBundle), OutputFormat: acds.OutputFHIRR4}); err == nil {
				accepted.Add(1)
			}
		}
	})
	backupDir := filepath.Join(t.TempDir(), "backup")
	rep, err := service.Backup(ctx, service.BackupOptions{DataDir: dir, Dir: backupDir})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backup: commit %d, %d bytes, %v; %d requests accepted meanwhile; files %v", rep.Seq, rep.Bytes, rep.Took, accepted.Load(), rep.Files)
	if rep.Seq == 0 || rep.Bytes == 0 {
		t.Fatalf("report %+v", rep)
	}
	for _, want := range []string{"replica.id", "deidentify.key.sealed"} {
		if !contains(rep.Files, want) {
			t.Errorf("the backup lacks %s: %v", want, rep.Files)
		}
	}
	if len(rep.LeftOut) != 1 || rep.LeftOut[0].Name != "notary.key" {
		t.Errorf("left out %+v, want the notary key alone", rep.LeftOut)
	}
	if _, err := os.Stat(filepath.Join(backupDir, "notary.key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unsealed notary key was copied: %v", err)
	}
	desc, err := os.ReadFile(filepath.Join(backupDir, service.BackupFile))
	if err != nil || !strings.Contains(string(desc), "left out: notary.key") {
		t.Errorf("BACKUP: %q %v", desc, err)
	}
	if _, err := service.Backup(ctx, service.BackupOptions{DataDir: dir, Dir: backupDir}); err == nil {
		t.Error("a backup into a directory that is not empty succeeded")
	}
	backupDB, err := os.ReadFile(filepath.Join(backupDir, "acds.db"))
	if err != nil {
		t.Fatal(err)
	}
	// One more acknowledged request, after the backup: the data
	// directory's mark is then ahead of the backup's database.
	after := process(t, ctx, c1, acds.OutputFHIRR4)
	if err := svc1.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The restore: a fresh data directory holding the backup alone.
	restored := filepath.Join(t.TempDir(), "restored")
	if err := os.Rename(backupDir, restored); err != nil {
		t.Fatal(err)
	}
	svc2, c2 := open(t, service.Options{DataDir: restored, Enclave: backend})
	c2 = c2.WithToken(token)
	for _, r := range before {
		got, err := c2.Request(ctx, r.RequestID)
		if err != nil || got.Status != acds.StatusCompleted || got.Result.OutputDigest != r.Result.OutputDigest {
			t.Fatalf("request %s after the restore: %+v %v", r.RequestID, got, err)
		}
	}
	if _, err := c2.Request(ctx, after.RequestID); err == nil {
		t.Error("a request made after the backup is in it")
	}
	again := process(t, ctx, c2, acds.OutputFHIRR4Deidentified)
	if a, b := patientID(t, before[0].Result.Output), patientID(t, again.Result.Output); a == "" || a != b {
		t.Errorf("pseudonyms %q before and %q after the restore: want the same installation's", a, b)
	}
	id1, _ := os.ReadFile(filepath.Join(dir, "replica.id"))
	id2, _ := os.ReadFile(filepath.Join(restored, "replica.id"))
	if len(id1) == 0 || string(id1) != string(id2) {
		t.Errorf("replica ids %q and %q", id1, id2)
	}
	if err := svc2.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Only the backup's database put back under the original directory:
	// its mark counts the request made after the backup, so it refuses.
	for _, f := range []string{"acds.db-wal", "acds.db-shm"} {
		_ = os.Remove(filepath.Join(dir, f))
	}
	if err := os.WriteFile(filepath.Join(dir, "acds.db"), backupDB, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = service.Open(ctx, service.Options{DataDir: dir, Enclave: backend})
	var loss *sqlstore.DataLossError
	if !errors.Is(err, store.ErrDataLoss) || !errors.As(err, &loss) || loss.Kind != sqlstore.LossBehind || !strings.Contains(err.Error(), "--accept-data-loss") {
		t.Fatalf("a database restored under a newer mark: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// A simulated enclave's keys in the data directory are not copied (they
// are kept in the clear), and the report says so; a PostgreSQL store is
// refused with the way to back it up.
func TestBackupLeavesOutUnsealedSecrets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := dataDir(t)
	svc, _ := open(t, service.Options{DataDir: dir})
	backupDir := filepath.Join(t.TempDir(), "backup")
	rep, err := service.Backup(ctx, service.BackupOptions{DataDir: dir, Dir: backupDir})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range rep.LeftOut {
		names = append(names, l.Name)
	}
	if !contains(names, filepath.Join("enclave", "enclave-sim")) || !contains(names, "notary.key") {
		t.Errorf("left out %v", names)
	}
	if _, err := os.Stat(filepath.Join(backupDir, "enclave")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the simulated enclave's keys were copied: %v", err)
	}
	_ = svc.Close(ctx)

	_, err = service.Backup(ctx, service.BackupOptions{DataDir: dir, Store: "postgres://u@127.0.0.1/db", Dir: filepath.Join(t.TempDir(), "b")})
	if !errors.Is(err, service.ErrBackupPostgres) || !strings.Contains(err.Error(), "pg_dump") {
		t.Errorf("a postgres backup: %v", err)
	}
}
