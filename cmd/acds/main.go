// Command acds runs the Attested Clinical Data Service and its tools: the
// API server, a standalone notary, the demo portal, offline verification,
// code measurement, reference-value manifests and FHIR utilities.
//
// Run `acds help` for the list of commands; DESIGN.md §8 is the contract
// for their flags and exit codes.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/acds-project/acds"
)

// env is what a subcommand may touch of the process: its arguments,
// standard streams and environment lookups. Tests run subcommands with
// their own env instead of the real process.
type env struct {
	args   []string // arguments after the subcommand name
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// resolver resolves portal names in `acds notary`; nil means the
	// system's. Tests set a stub (internal/testrig/dnstest) so that no public name
	// is ever resolved.
	resolver *net.Resolver
}

// command is one subcommand. It returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, e env) int
}

func commands() map[string]command {
	return map[string]command{
		"serve":    {"run the API server", runServe},
		"backup":   {"copy a running installation's store and sealed files", runBackup},
		"notary":   {"run a standalone MPC-TLS recording notary", runNotary},
		"portal":   {"run the demo clinical portal over HTTPS", runPortal},
		"verify":   {"verify an attestation bundle offline, or a server's attested TLS", runVerify},
		"disclose": {"write a disclosure of chosen entries of an attested output", runDisclose},
		"measure":  {"print the code hash of a file or of this binary", runMeasure},
		"manifest": {"sign and verify reference-value manifests", runManifest},
		"fhir":     {"validate and format FHIR R4 resources", runFHIR},
		"demo":     {"run the whole flow in one process and print a summary", runDemo},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}))
}

// run dispatches args[0] to its subcommand.
func run(ctx context.Context, args []string, e env) int {
	cmds := commands()
	if len(args) == 0 {
		usage(e.stderr, cmds)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(e.stdout, cmds) // asked for: standard output
		return 0
	case "version", "--version":
		fmt.Fprintln(e.stdout, version())
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "acds: unknown command %q\n\n", args[0])
		usage(e.stderr, cmds)
		return 2
	}
	e.args = args[1:]
	return c.run(ctx, e)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: acds <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, name := range []string{"serve", "backup", "notary", "portal", "verify", "disclose", "measure", "manifest", "fhir", "demo"} {
		fmt.Fprintf(w, "  %-9s %s\n", name, cmds[name].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "run `acds <command> -h` for a command's flags, `acds version` for this build")
}

// version is the service version (acds.Version, what /v1/health and the
// ready line report), then the module version and VCS revision this
// binary was built from, as the Go toolchain recorded them, and the Go
// version.
func version() string {
	v := "acds " + acds.Version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v += " (module " + bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v += " " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				v += " (modified)"
			}
		}
	}
	return v + ", " + bi.GoVersion + ")"
}
