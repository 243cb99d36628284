package service

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/acds-project/acds/attestation"
	sevdevice "github.com/acds-project/acds/attestation/sevsnp/device"
	"github.com/acds-project/acds/attestation/sim"
	tdxdevice "github.com/acds-project/acds/attestation/tdx/device"
	"github.com/acds-project/acds/attestation/tpm"
	tpmdevice "github.com/acds-project/acds/attestation/tpm/device"
)

// Enclave kinds: what Options.EnclaveKind and OpenBackend accept (`acds
// serve --enclave`).
const (
	// EnclaveAuto uses the hardware it finds (SEV-SNP, TDX, then a TPM)
	// and otherwise the simulated enclave, loudly: a warning in the log,
	// and the profile sev-snp-sim in every bundle and in /v1/health.
	EnclaveAuto = "auto"
	// EnclaveSEVSNP, EnclaveTDX and EnclaveTPM name hardware; absent
	// hardware is an error naming the device.
	EnclaveSEVSNP = attestation.ProfileSEVSNP
	EnclaveTDX    = attestation.ProfileTDX
	EnclaveTPM    = attestation.ProfileTPM
	// EnclaveSimulated is the simulated SEV-SNP enclave, its keys in the
	// data directory. It proves the code path, not hardware.
	EnclaveSimulated = attestation.ProfileSEVSNPSim
)

// EnclaveKinds lists the kinds OpenBackend accepts, auto first.
func EnclaveKinds() []string {
	return []string{EnclaveAuto, EnclaveSEVSNP, EnclaveTDX, EnclaveTPM, EnclaveSimulated}
}

// BackendOptions configure OpenBackend.
type BackendOptions struct {
	// StateDir keeps the enclave's state: the simulated chip's keys and
	// root, the TPM's sealed key. Required for sev-snp-sim and tpm (and
	// auto). Open uses DataDir/enclave.
	StateDir string
	// TPMDevice is the TPM: a character device or mssim://HOST:PORT (see
	// package attestation/tpm/device). Zero value: /dev/tpmrm0.
	TPMDevice string
	// Logger receives auto's choice and its warning when it simulates.
	// Zero value: discarded.
	Logger *slog.Logger

	// probe, when set, replaces the hardware detection of auto (tests).
	probe func(kind string) bool
}

// ErrUnknownEnclave is wrapped by OpenBackend's error for a kind that is
// not one of EnclaveKinds.
var ErrUnknownEnclave = errors.New("service: unknown enclave kind")

// OpenBackend opens the enclave backend of kind (one of EnclaveKinds; ""
// is EnclaveSimulated). Hardware that is absent is an error wrapping
// attestation.ErrNoTEE that names the device paths looked for. The caller
// closes a backend that implements io.Closer (the TPM's, the TDX
// device's).
//
// auto detects, in this order, SEV-SNP (configfs-tsm with the sev_guest
// provider, or /dev/sev-guest), TDX (configfs-tsm with the tdx_guest
// provider, or /dev/tdx_guest), a TPM (TPMDevice, by default
// /dev/tpmrm0), and falls back to the simulated enclave with a warning.
// Hardware that is present but fails to open is an error, never a silent
// fallback.
func OpenBackend(ctx context.Context, kind string, o BackendOptions) (attestation.Backend, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if kind == "" {
		kind = EnclaveSimulated
	}
	tpmPath := o.TPMDevice
	if tpmPath == "" {
		tpmPath = tpmdevice.DefaultPath
	}
	if kind == EnclaveAuto {
		probe := o.probe
		if probe == nil {
			probe = func(k string) bool { return present(k, tpmPath) }
		}
		kind = EnclaveSimulated
		for _, k := range []string{EnclaveSEVSNP, EnclaveTDX, EnclaveTPM} {
			if probe(k) {
				kind = k
				break
			}
		}
		if kind == EnclaveSimulated {
			log.Warn("no TEE found (no SEV-SNP or TDX guest interface, no TPM at "+tpmPath+"): running the SIMULATED enclave; its bundles prove the code path, not hardware",
				"enclave", EnclaveSimulated)
		} else {
			log.Info("enclave hardware found", "enclave", kind)
		}
	}
	switch kind {
	case EnclaveSimulated:
		if o.StateDir == "" {
			return nil, fmt.Errorf("%w: the simulated enclave needs a state directory", ErrInvalidOptions)
		}
		return sim.NewBackend(o.StateDir, sim.Options{})
	case EnclaveSEVSNP:
		return sevdevice.Open(ctx, sevdevice.Options{})
	case EnclaveTDX:
		return tdxdevice.Open(ctx, tdxdevice.Options{})
	case EnclaveTPM:
		if o.StateDir == "" {
			return nil, fmt.Errorf("%w: the TPM enclave needs a state directory for its sealed key", ErrInvalidOptions)
		}
		return tpmdevice.Open(ctx, tpmdevice.Options{Path: tpmPath, StateDir: o.StateDir})
	}
	return nil, fmt.Errorf("%w %q: want one of %s", ErrUnknownEnclave, kind, strings.Join(EnclaveKinds(), ", "))
}

// present reports whether this machine offers kind's guest interface.
func present(kind, tpmPath string) bool {
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	switch kind {
	case EnclaveSEVSNP:
		return exists(sevdevice.GuestDevice) || tsmProvider("sev_guest")
	case EnclaveTDX:
		return exists(tdxdevice.GuestDevice) || tsmProvider("tdx_guest")
	case EnclaveTPM:
		return strings.HasPrefix(tpmPath, "mssim://") || exists(tpmPath)
	}
	return false
}

// tsmProvider reports whether configfs-tsm is backed by provider: the
// kernel names it in the provider attribute of a report entry, which
// exists only once one is made, so a temporary entry is made and removed.
func tsmProvider(provider string) bool {
	dir, err := os.MkdirTemp(tsmReport, "acds-probe-")
	if err != nil {
		return false
	}
	defer os.Remove(dir)
	b, err := os.ReadFile(dir + "/provider")
	return err == nil && strings.TrimSpace(string(b)) == provider
}

// tsmReport is configfs-tsm's report directory.
const tsmReport = "/sys/kernel/config/tsm/report"

// TPMAKFile is the name, in the data directory, of the PEM public key of
// a TPM enclave's attestation key, written at every start: what a
// verifier pins (`acds verify --tpm-ak FILE`) when the AK has no
// certificate. It is public.
const TPMAKFile = "tpm-ak.pem"

// publishTPMKey writes the TPM enclave's AK to DataDir/TPMAKFile and logs
// its fingerprint; other enclaves have none.
func (s *Service) publishTPMKey(dataDir string, log *slog.Logger) error {
	boot := s.encl.BootEvidence()
	if boot.Profile != attestation.ProfileTPM {
		return nil
	}
	ak, cert, err := tpm.ParseAK(boot.Evidence)
	if err != nil {
		return fmt.Errorf("enclave tpm: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(ak)
	if err != nil {
		return fmt.Errorf("enclave tpm: %w", err)
	}
	path := filepath.Join(dataDir, TPMAKFile)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("enclave tpm: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("enclave tpm: %w", err)
	}
	sum := sha256.Sum256(der)
	log.Info("TPM attestation key", "file", path, "sha256", hex.EncodeToString(sum[:]), "certified", cert != nil)
	return nil
}
