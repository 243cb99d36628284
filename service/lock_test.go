package service_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/service"
)

// TestDataDirLock: while a Service holds a data directory, a second Open
// of it fails with a *DataDirLockedError naming the directory and the
// holder's pid, and nothing of the second is left running; after Close
// the directory opens again. flock belongs to the open file description,
// so this holds within one process too.
func TestDataDirLock(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no flock")
	}
	ctx := context.Background()
	dir := dataDir(t)
	first, err := service.Open(ctx, service.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	second, err := service.Open(ctx, service.Options{DataDir: dir})
	var locked *service.DataDirLockedError
	if second != nil || !errors.Is(err, service.ErrDataDirLocked) || !errors.As(err, &locked) {
		t.Fatalf("second Open: %v, %v; want a DataDirLockedError", second, err)
	}
	abs, _ := filepath.Abs(dir)
	if locked.Dir != abs || locked.PID != os.Getpid() || !strings.Contains(err.Error(), abs) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("error %q (%+v): want it to name %s and pid %d", err, locked, abs, os.Getpid())
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := service.Open(ctx, service.Options{DataDir: dir})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	again.Close(ctx)
}

// TestDataDirLockSharedStore: replicas share a store but not a data
// directory; only the directory is locked.
func TestDataDirLockSharedStore(t *testing.T) {
	ctx := context.Background()
	st, err := service.OpenStore(ctx, "sqlite:"+filepath.Join(t.TempDir(), "shared.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, _ := open(t, service.Options{DataDir: dataDir(t), Server: server.Config{Store: st}})
	b, _ := open(t, service.Options{DataDir: dataDir(t), Server: server.Config{Store: st}})
	if a.Store() != b.Store() {
		t.Fatal("not the same store")
	}
}

// TestDataDirLockOtherProcess: a service in another process holds the
// directory; Open here names that process, and succeeds once it exited.
func TestDataDirLockOtherProcess(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no flock")
	}
	if dir := os.Getenv("ACDS_TEST_LOCK_HOLDER"); dir != "" {
		svc, err := service.Open(context.Background(), service.Options{DataDir: dir})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("holding")
		io.Copy(io.Discard, os.Stdin) // until the parent closes our stdin
		svc.Close(context.Background())
		os.Exit(0)
	}
	dir := dataDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestDataDirLockOtherProcess$")
	cmd.Env = append(os.Environ(), "ACDS_TEST_LOCK_HOLDER="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Scan()
		line <- sc.Text()
		io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		if l != "holding" {
			t.Fatalf("holder: %q", l)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the holder did not start")
	}
	_, err := service.Open(context.Background(), service.Options{DataDir: dir})
	var locked *service.DataDirLockedError
	if !errors.As(err, &locked) || locked.PID != cmd.Process.Pid {
		t.Fatalf("Open while another process holds %s: %v; want its pid %d named", dir, err, cmd.Process.Pid)
	}
	// A holder that is killed (no Close) still releases the lock.
	stdin.Close()
	cmd.Process.Kill()
	cmd.Wait()
	svc, err := service.Open(context.Background(), service.Options{DataDir: dir})
	if err != nil {
		t.Fatalf("Open after the holder exited: %v", err)
	}
	svc.Close(context.Background())
}
