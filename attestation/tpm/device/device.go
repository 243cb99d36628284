// Package device is the TPM side of ACDS: the attestation.Backend of a
// machine with a TPM 2.0 (a confidential or shielded VM's vTPM, a
// physical TPM, or swtpm for tests). It is the only code of the tpm family
// that touches a TPM; package tpm verifies what it produces.
//
// [Open] returns a [Backend] that talks to the TPM at Options.Path — a
// character device (/dev/tpmrm0, the kernel's resource manager) or
// mssim://HOST:PORT, the TCP command port of the TPM reference simulator's
// protocol as swtpm serves it (`swtpm socket --server type=tcp,port=P
// --flags not-need-init,startup-clear`; the platform port is not used, so
// the TPM must already be started; swtpm serves one connection at a time)
// — or to an open transport
// (Options.Transport, e.g. go-tpm-tools' simulator in tests).
//
// # Evidence
//
// Quote makes a go-tpm-tools attestation (what tpm.Verify accepts): a quote
// of every allocated PCR bank by the attestation key (AK) over the 64
// bytes of report data, the TCG event log, and the AK certificate when the
// TPM has one. The AK is the one a Google Compute Engine vTPM provisions
// with a certificate (its template and certificate in NV), otherwise
// go-tpm-tools' ECC P-256 AK of the owner hierarchy, which has no
// certificate: a verifier pins it (`acds verify --tpm-ak`). The event log
// is the kernel's (/sys/kernel/security/tpm0/binary_bios_measurements) for
// a device path, none for mssim:// (a fresh swtpm has all PCRs zero, which
// an empty log explains), or Options.EventLog.
//
// # Measurement
//
// The measurement is tpm.MeasurementOf the SHA-256 PCRs Options.PCRs (by
// default tpm.DefaultPCRs: 0 to 9, firmware, Secure Boot policy, boot
// loader, kernel and command line on a UEFI machine with GRUB), read at
// Open: SHA-256 over the concatenated 32-byte values. Verifiers use the
// same selection (verify.Policy.TPMPCRs).
//
// # Sealing
//
// The sealing key is 32 random bytes made on first start, sealed by the
// TPM's storage root key to the current values of the same PCRs
// (go-tpm-tools' Key.Seal with SealOpts.Current), and kept in
// Options.StateDir/SealedKeyFile. The TPM unseals it only while those PCRs
// hold the same values: another boot chain, another kernel or another TPM
// cannot, and Open then fails saying so.
//
// The device packages of the three hardware kinds have one shape:
// device.Open(ctx, device.Options) (*device.Backend, error), where the zero
// Options use the machine's own device and the fields inject another one.
package device

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/tpm"
	"github.com/google/go-tpm-tools/client"
	pb "github.com/google/go-tpm-tools/proto/tpm"
	"github.com/google/go-tpm/legacy/tpm2"
	"google.golang.org/protobuf/proto"
)

// DefaultPath is the TPM Open uses when Options.Path is empty.
const DefaultPath = "/dev/tpmrm0"

// KernelEventLog is where Linux exposes the firmware's TCG event log.
const KernelEventLog = "/sys/kernel/security/tpm0/binary_bios_measurements"

// SealedKeyFile is the name, in Options.StateDir, of the PCR-sealed
// sealing key.
const SealedKeyFile = "tpm-sealing-key.pb"

// maxEventLog bounds the event log read from a file (real ones are 20 to
// 100 KiB; tpm.Verify accepts attestations up to tpm.MaxAttestationSize).
const maxEventLog = tpm.MaxAttestationSize / 2

// Options say which TPM to use and where its sealed key lives.
type Options struct {
	// Path is the TPM: a character device, or mssim://HOST:PORT for the
	// command port of a TPM simulator (swtpm). Zero value: DefaultPath.
	// Ignored when Transport is set.
	Path string
	// Transport is an open connection to a TPM, used instead of Path (the
	// caller closes it after Close). When it implements
	// client.EventLogGetter its event log is used. Zero value: open Path.
	Transport io.ReadWriter
	// StateDir is the directory holding the sealed sealing key
	// (SealedKeyFile), created 0700 when missing. Required.
	StateDir string
	// EventLog is the path of the TCG event log to attach to quotes. Zero
	// value: KernelEventLog for a device Path, none for mssim:// and for a
	// Transport that does not provide one.
	EventLog string
	// PCRs are the SHA-256 PCRs the measurement and the sealing cover.
	// Zero value: tpm.DefaultPCRs().
	PCRs []int
	// Timeout bounds each exchange with an mssim:// TPM (connect, command,
	// response). Zero value: 30 seconds.
	Timeout time.Duration
}

// Backend is the attestation.Backend of a TPM. It is safe for concurrent
// use: TPM commands are serialised. Close it when done.
type Backend struct {
	mu          sync.Mutex
	rw          io.ReadWriter
	closeRW     func() error
	ak          *client.Key
	pcrs        tpm2.PCRSelection
	measurement []byte
	stateDir    string
}

var _ attestation.Backend = (*Backend)(nil)

// Open connects to the TPM o names, loads its attestation key and reads the
// measurement. A missing device is an error wrapping attestation.ErrNoTEE
// naming the path.
func Open(ctx context.Context, o Options) (_ *Backend, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.StateDir == "" {
		return nil, errors.New("tpm: Options.StateDir is required (where the sealed key is kept)")
	}
	sel := o.PCRs
	if sel == nil {
		sel = tpm.DefaultPCRs()
	}
	sel = slices.Compact(slices.Sorted(slices.Values(sel)))
	if len(sel) == 0 || sel[0] < 0 || sel[len(sel)-1] >= client.NumPCRs {
		return nil, fmt.Errorf("tpm: PCRs %v: want indices 0 to %d, at least one", o.PCRs, client.NumPCRs-1)
	}
	b := &Backend{pcrs: tpm2.PCRSelection{Hash: tpm2.AlgSHA256, PCRs: sel}, stateDir: o.StateDir, closeRW: func() error { return nil }}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	eventLog := o.EventLog
	switch path := cmp(o.Path, DefaultPath); {
	case o.Transport != nil:
		b.rw = o.Transport
	case strings.HasPrefix(path, "mssim://"):
		c, err := dialMSSim(strings.TrimPrefix(path, "mssim://"), cmpDur(o.Timeout, 30*time.Second))
		if err != nil {
			return nil, fmt.Errorf("%w: tpm %s: %w", attestation.ErrNoTEE, path, err)
		}
		b.rw, b.closeRW = c, c.Close
	default:
		f, err := openDevice(path) // device_*.go
		if err != nil {
			return nil, fmt.Errorf("%w: tpm: no TPM at %s: %w", attestation.ErrNoTEE, path, err)
		}
		b.rw, b.closeRW = f, f.Close
		if eventLog == "" {
			eventLog = kernelEventLog
		}
	}
	if eventLog != "" {
		b.rw = withEventLog{b.rw, eventLog}
	} else if _, ok := b.rw.(client.EventLogGetter); !ok {
		b.rw = withEventLog{b.rw, ""}
	}
	if b.ak, err = loadAK(b.rw); err != nil {
		return nil, fmt.Errorf("tpm: attestation key: %w", err)
	}
	pcrs, err := client.ReadPCRs(b.rw, b.pcrs)
	if err != nil {
		return nil, fmt.Errorf("tpm: reading PCRs %v: %w", sel, err)
	}
	if b.measurement = tpm.MeasurementOf(pcrs.GetPcrs(), sel); b.measurement == nil {
		return nil, fmt.Errorf("tpm: the TPM did not return SHA-256 PCRs %v", sel)
	}
	return b, nil
}

// loadAK is the certified AK a GCE vTPM provisions, else go-tpm-tools'
// owner-hierarchy ECC AK.
func loadAK(rw io.ReadWriter) (*client.Key, error) {
	if ak, err := client.GceAttestationKeyECC(rw); err == nil {
		if ak.Cert() != nil {
			return ak, nil
		}
		ak.Close()
	}
	return client.AttestationKeyECC(rw)
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func cmpDur(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// withEventLog gives go-tpm-tools the event log of a file, or none.
type withEventLog struct {
	io.ReadWriter
	path string
}

func (w withEventLog) EventLog() ([]byte, error) {
	if w.path == "" {
		return []byte{}, nil
	}
	f, err := os.Open(w.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxEventLog+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxEventLog {
		return nil, fmt.Errorf("event log %s is larger than %d bytes", w.path, maxEventLog)
	}
	return b, nil
}

// Profile returns attestation.ProfileTPM.
func (b *Backend) Profile() string { return attestation.ProfileTPM }

// Measurement returns tpm.MeasurementOf the PCRs read at Open (32 bytes).
func (b *Backend) Measurement() []byte { return bytes.Clone(b.measurement) }

// PCRs returns the SHA-256 PCR indices the measurement and sealing cover.
func (b *Backend) PCRs() []int { return slices.Clone(b.pcrs.PCRs) }

// AK returns the attestation key's public key: what a verifier pins when
// the AK has no certificate (verify.Policy.TPMTrustedAKs).
func (b *Backend) AK() crypto.PublicKey { return b.ak.PublicKey() }

// AKCertificate returns the DER AK certificate, or nil when the TPM has
// none.
func (b *Backend) AKCertificate() []byte {
	if c := b.ak.Cert(); c != nil {
		return bytes.Clone(c.Raw)
	}
	return nil
}

// Quote returns the protobuf-encoded go-tpm-tools attestation whose quote
// nonce is reportData (all 64 bytes).
func (b *Backend) Quote(ctx context.Context, reportData [64]byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	att, err := b.ak.Attest(client.AttestOpts{Nonce: reportData[:], SkipTeeAttestation: true})
	b.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("tpm quote: %w", err)
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(att)
	if err != nil {
		return nil, fmt.Errorf("tpm quote: encoding: %w", err)
	}
	if len(raw) > tpm.MaxAttestationSize {
		return nil, fmt.Errorf("tpm quote of %d bytes exceeds %d (is the event log that large?)", len(raw), tpm.MaxAttestationSize)
	}
	return raw, nil
}

// SealingKey returns the 32-byte key sealed to the PCRs in
// StateDir/SealedKeyFile, making and sealing it on first use. When the TPM
// refuses to unseal it (the PCRs changed: another boot chain; or another
// TPM) the error wraps attestation.ErrSealed and says what to do.
func (b *Backend) SealingKey(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	path := filepath.Join(b.stateDir, SealedKeyFile)
	srk, err := client.StorageRootKeyECC(b.rw)
	if err != nil {
		return nil, fmt.Errorf("tpm: storage root key: %w", err)
	}
	defer srk.Close()
	blob, err := readSmall(path)
	if errors.Is(err, os.ErrNotExist) {
		return b.newSealedKey(srk, path)
	}
	if err != nil {
		return nil, fmt.Errorf("tpm sealed key: %w", err)
	}
	var sealed pb.SealedBytes
	if err := proto.Unmarshal(blob, &sealed); err != nil {
		return nil, fmt.Errorf("tpm sealed key %s: %w: %v", path, attestation.ErrSealed, err)
	}
	key, err := srk.Unseal(&sealed, client.UnsealOpts{})
	if err != nil {
		return nil, fmt.Errorf("tpm sealed key %s: %w: the TPM refuses to unseal it (PCRs %v differ from when it was sealed, or this is another TPM): %v; "+
			"to start anew, move the enclave state away (what it sealed is then lost)", path, attestation.ErrSealed, b.pcrs.PCRs, err)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("tpm sealed key %s: %w: %d bytes", path, attestation.ErrSealed, len(key))
	}
	return key, nil
}

func (b *Backend) newSealedKey(srk *client.Key, path string) ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	sealed, err := srk.Seal(key, client.SealOpts{Current: b.pcrs})
	if err != nil {
		return nil, fmt.Errorf("tpm: sealing the key to PCRs %v: %w", b.pcrs.PCRs, err)
	}
	blob, err := proto.Marshal(sealed)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(b.stateDir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("tpm sealed key: %w", err)
	}
	if _, err := f.Write(blob); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("tpm sealed key: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("tpm sealed key: %w", err)
	}
	return key, nil
}

// readSmall reads a file of at most 64 KiB.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10+1))
	if err != nil {
		return nil, err
	}
	if len(b) > 64<<10 {
		return nil, fmt.Errorf("%s is larger than 64 KiB", path)
	}
	return b, nil
}

// Close flushes the attestation key from the TPM and closes a connection
// Open made.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ak != nil {
		b.ak.Close()
		b.ak = nil
	}
	return b.closeRW()
}
