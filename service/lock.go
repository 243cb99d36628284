package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFile is the name of the lock file Open keeps in the data directory.
const LockFile = "LOCK"

// ErrDataDirLocked is matched (errors.Is) by the error of Open when another
// service — in this process or another — holds the data directory.
var ErrDataDirLocked = errors.New("service: data directory in use")

// DataDirLockedError is the error of Open when another service holds the
// data directory: one data directory serves one service at a time (its
// SQLite store, enclave keys and notary key are not shared). Replicas
// sharing a PostgreSQL store each have their own data directory.
type DataDirLockedError struct {
	Dir string // the data directory
	PID int    // the holder's process id as it recorded it, 0 if unknown
}

func (e *DataDirLockedError) Error() string {
	holder := "another ACDS service"
	if e.PID > 0 {
		holder += " (pid " + strconv.Itoa(e.PID) + ")"
	}
	return fmt.Sprintf("service: data directory %s is in use by %s; stop it or give this one another data directory", e.Dir, holder)
}

// Is matches ErrDataDirLocked.
func (e *DataDirLockedError) Is(target error) bool { return target == ErrDataDirLocked }

// dirLock is an exclusive advisory lock on DataDir/LOCK, held until
// release. The file itself stays; only the lock matters, and the kernel
// drops it when the holder exits, however it exits.
type dirLock struct{ f *os.File }

// lockDataDir takes the lock of dir and records this process's id in it.
func lockDataDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	if !held {
		pid := readPID(f)
		f.Close()
		abs, aerr := filepath.Abs(dir)
		if aerr != nil {
			abs = dir
		}
		return nil, &DataDirLockedError{Dir: abs, PID: pid}
	}
	// The pid is informative only (the lock decides); a failure to
	// record it is not worth refusing to start for.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// release drops the lock. It is safe on a nil lock.
func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor drops the lock
	l.f = nil
	return err
}

func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
