package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/acds-project/acds"
)

// TestParseArgs: flags may come before or after positional arguments,
// "--" ends them, and -h or a bad flag maps to exit 0 or 2.
func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		json bool
	}{
		{[]string{"a", "--json", "b"}, []string{"a", "b"}, true},
		{[]string{"--json", "a"}, []string{"a"}, true},
		{[]string{"a", "--", "--json"}, []string{"a", "--json"}, false},
		{[]string{"--", "-"}, []string{"-"}, false},
		{nil, nil, false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		asJSON := fs.Bool("json", false, "")
		pos, err := parseArgs(fs, tc.args, io.Discard)
		if err != nil || !reflect.DeepEqual(pos, tc.pos) || *asJSON != tc.json {
			t.Errorf("%q: %q json=%v %v; want %q json=%v", tc.args, pos, *asJSON, err, tc.pos, tc.json)
		}
	}
	// Help asked for goes to the help writer, a mistake's usage to the
	// flag set's output (standard error).
	for _, c := range []struct {
		arg            string
		code           int
		toHelp, toErrs bool
	}{{"-h", 0, true, false}, {"--help", 0, true, false}, {"--nope", 2, false, true}} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var help, errs strings.Builder
		fs.SetOutput(&errs)
		fs.Usage = func() { fmt.Fprintln(fs.Output(), "usage: t") }
		_, err := parseArgs(fs, []string{"x", c.arg}, &help)
		if err == nil || parseExit(err) != c.code {
			t.Errorf("%s: %v, exit %d; want %d", c.arg, err, parseExit(err), c.code)
		}
		if (help.Len() > 0) != c.toHelp || strings.Contains(errs.String(), "usage") != c.toErrs {
			t.Errorf("%s: help writer %q, standard error %q", c.arg, help.String(), errs.String())
		}
	}
	// After --, -h is an argument.
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	if pos, err := parseArgs(fs, []string{"--", "-h"}, io.Discard); err != nil || len(pos) != 1 || pos[0] != "-h" {
		t.Errorf("-- -h: %q %v", pos, err)
	}
}

func TestReadArg(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := readArg(p, nil, 5); err != nil || string(b) != "12345" {
		t.Errorf("file: %q %v", b, err)
	}
	if b, err := readArg("-", strings.NewReader("abc"), 5); err != nil || string(b) != "abc" {
		t.Errorf("stdin: %q %v", b, err)
	}
	if _, err := readArg(p, nil, 4); err == nil {
		t.Error("over the limit: no error")
	}
	if _, err := readArg(filepath.Join(t.TempDir(), "none"), nil, 5); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}

// TestSetUsage: the help prints the synopses, the description, the exit
// codes and the flags with their defaults, in that order, and every
// subcommand's -h goes through it.
func TestSetUsage(t *testing.T) {
	var buf strings.Builder
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&buf)
	fs.String("addr", "127.0.0.1:1", "listen address")
	setUsage(fs, help{usage: []string{"acds t [--addr A]", "acds t --other"}, about: "\nDoes t.\nTwice.", exit: "0 ok, 2 usage error."})
	fs.Usage()
	want := "usage: acds t [--addr A]\n       acds t --other\n\nDoes t.\nTwice.\n\nExit status: 0 ok, 2 usage error.\n\n" +
		"  -addr string\n    \tlisten address (default \"127.0.0.1:1\")\n"
	if buf.String() != want {
		t.Errorf("usage:\n%s\nwant:\n%s", buf.String(), want)
	}
	for _, args := range [][]string{{"demo"}, {"notary"}, {"portal"}, {"serve"}, {"verify"}, {"measure"},
		{"fhir", "validate"}, {"fhir", "fmt"}, {"fhir", "path"}} {
		h := helpText(t, args...)
		if !strings.HasPrefix(h, "usage: acds "+strings.Join(args, " ")) || !strings.Contains(h, "\n\nExit status: ") {
			t.Errorf("acds %s -h:\n%s", strings.Join(args, " "), h)
		}
	}
}

// TestVersion: acds version and --version print the service version (the
// one /v1/health reports) on standard output, and acds help the usage.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		code, out, errOut := attRun(t, "", arg)
		if code != 0 || !strings.HasPrefix(out, "acds "+acds.Version+" ") || errOut != "" {
			t.Errorf("acds %s: exit %d, %q %q", arg, code, out, errOut)
		}
	}
	if code, out, _ := attRun(t, "", "help"); code != 0 || !strings.Contains(out, "usage: acds <command>") {
		t.Errorf("acds help: exit %d, %q", code, out)
	}
}
