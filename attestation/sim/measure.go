package sim

import (
	"crypto/sha512"
	"fmt"
	"io"
	"os"
)

// MeasureFile returns SHA-384 of the file at path: the code hash a
// simulated enclave running that executable reports.
func MeasureFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("measure: %w", err)
	}
	defer f.Close()
	h := sha512.New384()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("measure %s: %w", path, err)
	}
	return h.Sum(nil), nil
}

// MeasureSelf returns SHA-384 of the running executable.
func MeasureSelf() ([]byte, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("measure: locating the executable: %w", err)
	}
	return MeasureFile(exe)
}
