package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// parseArgs parses a subcommand's flags, which may come before or after
// its positional arguments (`acds verify bundle.b64 --json`), and returns
// the positional ones. "--" ends the flags. Every subcommand parses with
// it.
func parseArgs(fs *flag.FlagSet, args []string, helpOut io.Writer) ([]string, error) {
	// Help that was asked for goes to standard output (acds verify -h |
	// less); the usage after a mistake stays on standard error.
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(helpOut)
			fs.Usage()
			return nil, flag.ErrHelp
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseExit is the exit code of a parseArgs error: 0 for -h (the usage
// was asked for and printed), 2 for a usage error (flag printed why).
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// readArg reads the file a command line names, "-" being standard input,
// up to limit bytes; more is an error.
func readArg(name string, stdin io.Reader, limit int64) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

// help is a subcommand's -h text.
type help struct {
	usage []string // synopses without "acds "'s "usage: " ("acds demo [--keep]")
	about string   // what the command does, lines as printed
	exit  string   // the exit codes after "Exit status: ", lines as printed
}

// setUsage makes fs's usage (-h, or a usage error) print h: the synopses,
// the description, the exit codes, then every flag with its default.
func setUsage(fs *flag.FlagSet, h help) {
	fs.Usage = func() {
		w := fs.Output()
		for i, u := range h.usage {
			if i == 0 {
				fmt.Fprintln(w, "usage: "+u)
			} else {
				fmt.Fprintln(w, "       "+u)
			}
		}
		for _, s := range []string{h.about, "Exit status: " + h.exit} {
			fmt.Fprintln(w)
			fmt.Fprintln(w, strings.TrimSpace(s))
		}
		fmt.Fprintln(w)
		fs.PrintDefaults()
	}
}
