//go:build windows

package device

import (
	"fmt"
	"io"

	"github.com/google/go-tpm/legacy/tpm2"
)

// kernelEventLog is empty on Windows: there is no kernel file to read, so
// a device TPM's event log must be given in Options.EventLog.
const kernelEventLog = ""

// openDevice opens the TPM through the Windows TPM Base Services, the
// only way Windows offers to a TPM: Options.Path must be left at
// DefaultPath (that is, empty), which here means TBS.
func openDevice(path string) (io.ReadWriteCloser, error) {
	if path != DefaultPath {
		return nil, fmt.Errorf("on Windows the TPM is reached through TBS only; leave Options.Path empty or use mssim://HOST:PORT, not %q", path)
	}
	return tpm2.OpenTPM()
}
