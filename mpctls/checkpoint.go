package mpctls

import (
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
)

// Checkpoint is what a notary in MPC mode signs before it reveals its
// share of a server key epoch to the prover: how many records of each
// direction it had committed (recorded) at that moment, and their Merkle
// root in arrival order (the root of the statement's tree cut there). The
// statement it signs at the end lists the same server counts as its
// reveal points (Statement.Reveals).
type Checkpoint struct {
	SessionID     [16]byte
	Epoch         uint32 // the server key epoch about to be revealed, from 0
	ClientRecords uint64
	ServerRecords uint64
	Root          [32]byte
	NotaryKeyID   [32]byte // KeyID of the signing key; Sign sets it
}

// checkpointContext separates checkpoint signatures from anything else a
// notary key signs (statements are COSE_Sign1 with their own content
// type, so no checkpoint parses as one and no statement as a checkpoint).
const checkpointContext = "acds/v1/mpc-checkpoint\x00"

// CheckpointSize is the encoded size of a signed checkpoint.
const CheckpointSize = 32 + 16 + 4 + 8 + 8 + 32 + ed25519.SignatureSize

func (c *Checkpoint) payload() []byte {
	b := make([]byte, 0, len(checkpointContext)+CheckpointSize)
	b = append(b, checkpointContext...)
	b = append(b, c.NotaryKeyID[:]...)
	b = append(b, c.SessionID[:]...)
	b = binary.BigEndian.AppendUint32(b, c.Epoch)
	b = binary.BigEndian.AppendUint64(b, c.ClientRecords)
	b = binary.BigEndian.AppendUint64(b, c.ServerRecords)
	return append(b, c.Root[:]...)
}

// Sign sets c.NotaryKeyID and returns the signed checkpoint
// (CheckpointSize bytes).
func (c *Checkpoint) Sign(key ed25519.PrivateKey) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: notary key is not an ed25519 private key", ErrStatement)
	}
	c.NotaryKeyID = KeyID(key.Public().(ed25519.PublicKey))
	p := c.payload()
	return append(p[len(checkpointContext):], ed25519.Sign(key, p)...), nil
}

// VerifyCheckpoint decodes a signed checkpoint and checks its signature
// against the trusted notary key it names; it fails closed (an empty
// trusted list verifies nothing). A malformed checkpoint wraps
// ErrStatement, a bad or untrusted signature ErrSignature.
func VerifyCheckpoint(b []byte, trusted []ed25519.PublicKey) (*Checkpoint, error) {
	if len(b) != CheckpointSize {
		return nil, fmt.Errorf("%w: checkpoint of %d bytes, want %d", ErrStatement, len(b), CheckpointSize)
	}
	c := &Checkpoint{}
	i := copy(c.NotaryKeyID[:], b)
	i += copy(c.SessionID[:], b[i:])
	c.Epoch = binary.BigEndian.Uint32(b[i:])
	c.ClientRecords = binary.BigEndian.Uint64(b[i+4:])
	c.ServerRecords = binary.BigEndian.Uint64(b[i+12:])
	i += 20
	i += copy(c.Root[:], b[i:])
	sig := b[i:]
	for _, k := range trusted {
		if len(k) == ed25519.PublicKeySize && KeyID(k) == c.NotaryKeyID {
			if !ed25519.Verify(k, c.payload(), sig) {
				return nil, fmt.Errorf("%w: checkpoint signature does not verify", ErrSignature)
			}
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: notary key %x is not trusted", ErrSignature, c.NotaryKeyID[:8])
}
