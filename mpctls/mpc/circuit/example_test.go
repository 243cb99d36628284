package circuit_test

import (
	"crypto/sha256"
	"fmt"

	"github.com/acds-project/acds/mpctls/mpc/circuit"
)

// The digest of a one-block message, computed by the compression circuit
// from the SHA-256 initial state.
func Example() {
	b := circuit.NewBuilder()
	state, block := b.Input(256), b.Input(512)
	b.Output(circuit.SHA256Compress(b, state, block))
	c, err := b.Build()
	if err != nil {
		panic(err)
	}
	padded := make([]byte, 64)
	copy(padded, "abc")
	padded[3] = 0x80
	padded[63] = 24 // the message length in bits
	out, err := c.Eval(circuit.SHA256IV[:], padded)
	if err != nil {
		panic(err)
	}
	want := sha256.Sum256([]byte("abc"))
	fmt.Println(string(out[0]) == string(want[:]), c.ANDs())
	// Output: true 22573
}
