//go:build !windows

package device

import (
	"io"
	"os"

	"github.com/google/go-tpm/legacy/tpm2"
)

// kernelEventLog is the event log a device path reads by default.
const kernelEventLog = KernelEventLog

// openDevice opens the TPM character device at path.
func openDevice(path string) (io.ReadWriteCloser, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	return tpm2.OpenTPM(path)
}
