package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// helpFlag is one flag as `acds <command> -h` prints it (flag.PrintDefaults).
type helpFlag struct {
	placeholder string // the value's name after the flag, "" for a bool
	def         string // the printed default, "" when none is printed
}

var defaultRE = regexp.MustCompile(`\(default ("(?:[^"\\]|\\.)*"|[^)]*)\)\s*$`)

// helpFlags runs `acds args… -h` and returns the flags its help lists.
func helpFlags(t *testing.T, args ...string) map[string]helpFlag {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := env{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
	if code := run(context.Background(), append(args, "-h"), e); code != 0 || stderr.Len() != 0 {
		t.Fatalf("acds %s -h: exit %d; help belongs on standard output, standard error got:\n%s", strings.Join(args, " "), code, stderr.String())
	}
	flags := map[string]helpFlag{}
	var name string
	var usage strings.Builder
	flush := func() {
		if name == "" {
			return
		}
		f := flags[name]
		if m := defaultRE.FindStringSubmatch(strings.TrimSpace(usage.String())); m != nil {
			f.def = strings.Trim(m[1], `"`)
		}
		flags[name] = f
		name = ""
		usage.Reset()
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			flush()
			fields := strings.Fields(line)
			name = strings.TrimPrefix(fields[0], "-")
			f := helpFlag{placeholder: strings.Join(fields[1:], " ")}
			// A short usage is printed on the flag's own line after a tab.
			if i := strings.IndexByte(line, '\t'); i >= 0 {
				f.placeholder = strings.Join(strings.Fields(line[len("  -"+name):i]), " ")
				usage.WriteString(line[i+1:])
			}
			flags[name] = f
		case strings.HasPrefix(line, "    \t") && name != "":
			usage.WriteString(" " + strings.TrimSpace(line))
		default:
			flush()
		}
	}
	flush()
	return flags
}

// TestCLIContractFlags pins the flags and defaults of DESIGN §8 ("flags are
// stable API") as a user sees them in `acds <command> -h`, and that every
// flag's value placeholder is one word (flag.PrintDefaults takes a
// back-quoted word of the usage as the placeholder, so back-quoting a
// phrase there printed "-notary acds notary").
func TestCLIContractFlags(t *testing.T) {
	const none = "\x00" // the flag exists and documents no default
	for _, c := range []struct {
		cmd   []string
		flags map[string]string // flag -> documented default (none: no default printed)
	}{
		{[]string{"serve"}, map[string]string{
			"addr": "127.0.0.1:8080", "data-dir": "./acds-data", "store": none, "notary": none,
			"notary-key": none, "portal-ca": none, "allow-private-portals": none,
			"registrations": none, "workers": fmt.Sprint(2 * runtime.NumCPU()), "rate-limit": "20", "tls": none, "log-level": "info",
			"retention": "720h0m0s", "max-queue": "5000",
			"enclave": "auto", "tpm-device": "/dev/tpmrm0",
		}},
		{[]string{"notary"}, map[string]string{"addr": "127.0.0.1:7047", "key": "notary.key", "portal-ca": none, "allow-private-targets": none}},
		{[]string{"portal"}, map[string]string{"addr": "127.0.0.1:8443", "ca-out": none, "patients": "25", "seed": "1"}},
		{[]string{"verify"}, map[string]string{"policy": none, "allow-simulated": none, "json": none, "server": none, "measurement": none,
			"tpm-ak": none, "tpm-ak-roots": none, "html": none}},
		{[]string{"manifest", "sign"}, map[string]string{"key": none, "in": none, "out": none, "pub-out": none}},
		{[]string{"manifest", "verify"}, map[string]string{"key": none, "in": none}},
		{[]string{"fhir", "validate"}, map[string]string{"json": none, "errors-only": none, "security-checks": none, "contained": "check"}},
		{[]string{"fhir", "fmt"}, map[string]string{"deidentify": none}},
		{[]string{"demo"}, map[string]string{"keep": none}},
		{[]string{"disclose"}, map[string]string{"bundle": none, "output": none, "select": none, "where": none, "out": "-", "key-file": none, "record": none}},
		{[]string{"verify"}, map[string]string{"disclosure": none}},
	} {
		got := helpFlags(t, c.cmd...)
		for name, def := range c.flags {
			f, ok := got[name]
			switch {
			case !ok:
				t.Errorf("acds %s: no --%s flag in -h", strings.Join(c.cmd, " "), name)
			case def == none && f.def != "":
				t.Errorf("acds %s --%s: default %q, the contract documents none", strings.Join(c.cmd, " "), name, f.def)
			case def != none && f.def != def:
				t.Errorf("acds %s --%s: default %q, want %q", strings.Join(c.cmd, " "), name, f.def, def)
			}
		}
		for name, f := range got {
			if strings.Contains(f.placeholder, " ") {
				t.Errorf("acds %s -h prints \"-%s %s\": the placeholder should be one word", strings.Join(c.cmd, " "), name, f.placeholder)
			}
		}
	}
}
