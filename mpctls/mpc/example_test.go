package mpc_test

import (
	"context"
	"fmt"
	"net"

	"github.com/acds-project/acds/mpctls/mpc"
	"github.com/acds-project/acds/mpctls/mpc/circuit"
)

// Two parties add their private 16-bit numbers; the prover learns the
// sum, the notary learns nothing, and the notary's Finalize confirms the
// prover was honest.
func Example() {
	b := circuit.NewBuilder()
	x, y := b.Input(16), b.Input(16)
	b.Output(b.Add(x, y))
	add, err := b.Build()
	if err != nil {
		panic(err)
	}
	party := func(conn net.Conn, role mpc.Role, mine []byte, out chan<- []byte) {
		ctx := context.Background()
		s, err := mpc.NewSession(ctx, conn, role, mpc.Config{OTBatch: 1024})
		if err != nil {
			panic(err)
		}
		defer s.Close()
		var px, ny []byte
		if role == mpc.Prover {
			px = mine
		} else {
			ny = mine
		}
		a, err := s.InputValue(ctx, mpc.Prover, 16, px)
		if err != nil {
			panic(err)
		}
		c, err := s.InputValue(ctx, mpc.Notary, 16, ny)
		if err != nil {
			panic(err)
		}
		sum, err := s.Call(ctx, add, a, c)
		if err != nil {
			panic(err)
		}
		v, err := s.Open(ctx, sum[0], mpc.ToProver)
		if err != nil {
			panic(err)
		}
		if err := s.Finalize(ctx); err != nil {
			panic(err)
		}
		out <- v
	}
	p, n := net.Pipe()
	fromN := make(chan []byte, 1)
	go party(n, mpc.Notary, []byte{0x01, 0x02}, fromN)
	fromP := make(chan []byte, 1)
	party(p, mpc.Prover, []byte{0x10, 0x20}, fromP)
	fmt.Printf("prover: %x, notary: %x\n", <-fromP, <-fromN)
	// Output: prover: 1122, notary:
}
