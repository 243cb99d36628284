package main

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"

	"github.com/acds-project/acds/attestation/sim"
)

// runMeasure prints the code hash a simulated enclave running FILE (or this
// binary) reports: lowercase hex SHA-384 of the executable.
//
//	acds measure [FILE]
//
// Exit 0 on success, 2 on a usage error or an unreadable file.
func runMeasure(ctx context.Context, e env) int {
	flags := flag.NewFlagSet("acds measure", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	setUsage(flags, help{usage: []string{"acds measure [FILE]"},
		about: "prints the code hash (hex SHA-384) of FILE, or of this acds binary",
		exit:  "0 printed, 2 usage error or an unreadable FILE."})
	args, err := parseArgs(flags, e.args, e.stdout)
	if err != nil {
		return parseExit(err)
	}
	var m []byte
	switch len(args) {
	case 0:
		m, err = sim.MeasureSelf()
	case 1:
		m, err = sim.MeasureFile(args[0])
	default:
		fmt.Fprintf(e.stderr, "acds measure: one FILE at most; got %d arguments\n", len(args))
		flags.Usage()
		return 2
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "acds measure: %v\n", err)
		return 2
	}
	fmt.Fprintln(e.stdout, hex.EncodeToString(m))
	return 0
}
