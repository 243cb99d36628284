package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/fhir"
)

// runFHIR validates and formats FHIR R4 resources.
//
//	acds fhir validate FILE… [--errors-only] [--json] [--security-checks] [--contained check|ignore]
//	acds fhir fmt FILE [--deidentify [--key-file F]] [--source S]
//	acds fhir path EXPRESSION FILE
//
// FILE may be "-" for standard input. validate reports every file (its
// issues, or why it could not be read, and a one-line summary) and exits 0
// when every file is valid FHIR R4, 1 when any is not, 2 on a usage error
// or when any file was unreadable. fmt prints the normalised canonical JSON (what the server returns
// as fhir_r4 output) and exits 0, 1 when the input is not valid, 2 on a
// usage error or an unreadable file.
func runFHIR(ctx context.Context, e env) int {
	if len(e.args) == 0 {
		fhirUsage(e.stderr)
		return 2
	}
	sub, rest := e.args[0], e.args[1:]
	switch sub {
	case "validate":
		return fhirValidate(rest, e)
	case "fmt":
		return fhirFmt(rest, e)
	case "path":
		return fhirPath(ctx, rest, e)
	case "-h", "--help", "help":
		fhirUsage(e.stdout)
		return 0
	}
	fmt.Fprintf(e.stderr, "acds fhir: unknown subcommand %q\n", sub)
	fhirUsage(e.stderr)
	return 2
}

func fhirUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: acds fhir validate FILE… [--errors-only] [--json] [--security-checks] [--contained check|ignore]")
	fmt.Fprintln(w, "       acds fhir fmt FILE [--deidentify [--key-file F]] [--source HOST]")
	fmt.Fprintln(w, "       acds fhir path EXPRESSION FILE")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "validate  checks FHIR R4 JSON, every file; exit 0 all valid, 1 any invalid, 2 usage or any unreadable")
	fmt.Fprintln(w, "fmt       prints the normalised canonical JSON (a collection Bundle with a Provenance)")
	fmt.Fprintln(w, "path      evaluates a FHIRPath expression; prints the result as a JSON array (exit 1 evaluation error)")
	fmt.Fprintln(w, "FILE may be - for standard input")
}

func fhirRead(name string, stdin io.Reader) ([]byte, error) {
	return readArg(name, stdin, fhir.DefaultMaxBytes)
}

// fhirFileResult is one file's entry in `acds fhir validate --json`.
type fhirFileResult struct {
	File     string                 `json:"file"`
	Valid    bool                   `json:"valid"`
	Errors   int                    `json:"errors"`
	Warnings int                    `json:"warnings"`
	Outcome  *fhir.OperationOutcome `json:"outcome"`         // null when the file could not be read
	Error    string                 `json:"error,omitempty"` // why the file could not be read
}

func fhirValidate(args []string, e env) int {
	fs := flag.NewFlagSet("acds fhir validate", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	asJSON := fs.Bool("json", false, "print a JSON array of {file, valid, errors, warnings, outcome, error} (outcome is a FHIR OperationOutcome; error says why a file could not be read)")
	errorsOnly := fs.Bool("errors-only", false, "report only error and fatal issues, leaving out warnings and information (the counts in the summaries still include them)")
	var opts fhir.ValidateOptions
	fs.BoolVar(&opts.SecurityChecks, "security-checks", false, "text that looks like HTML tags in a string is an error, not a warning (the HL7 validator's -security-checks)")
	fs.TextVar(&opts.Contained, "contained", fhir.ContainedCheck, "what to do with contained resources, a `mode`: check validates them fully, ignore leaves their contents unvalidated (the HL7 validator's validateContains IGNORE); local references to them still resolve")
	setUsage(fs, help{usage: []string{"acds fhir validate FILE… [--errors-only] [--json] [--security-checks] [--contained check|ignore]"},
		about: `
Validates each FILE (- for standard input) as FHIR R4 JSON, prints its issues and
a one-line summary per file (FILE: valid FHIR R4: 0 errors, 170 warnings).
Every file is reported, also after an unreadable one. --security-checks and
--contained mirror run settings of the HL7 validator; without them, files are
checked as the service checks its input.`,
		exit: `0 every file valid, 1 any file invalid, 2 usage error or any file
unreadable (after all files were reported).`})
	files, err := parseArgs(fs, args, e.stdout)
	if err != nil {
		return parseExit(err)
	}
	if len(files) == 0 {
		fmt.Fprintln(e.stderr, "acds fhir validate: no FILE")
		fs.Usage()
		return 2
	}
	results := []fhirFileResult{}
	invalid, unreadable := false, false
	for _, f := range files {
		data, err := fhirRead(f, e.stdin)
		if err != nil {
			unreadable = true
			results = append(results, fhirFileResult{File: f, Error: "cannot read: " + err.Error()})
			if !*asJSON {
				fmt.Fprintf(e.stdout, "%s: error: cannot read: %v\n", f, err)
			}
			continue
		}
		o := fhir.ValidateWith(data, opts)
		r := fhirFileResult{File: f, Valid: !o.HasErrors(), Errors: o.ErrorCount(), Outcome: o}
		var shown []fhir.Issue
		for _, is := range o.Issues {
			if is.Severity == fhir.SeverityWarning {
				r.Warnings++
			}
			if !*errorsOnly || is.Severity == fhir.SeverityError || is.Severity == fhir.SeverityFatal {
				shown = append(shown, is)
			}
		}
		if *errorsOnly {
			r.Outcome = &fhir.OperationOutcome{Issues: shown}
		}
		results = append(results, r)
		if !r.Valid {
			invalid = true
		}
		if *asJSON {
			continue
		}
		for _, is := range shown {
			fmt.Fprintf(e.stdout, "%s: %s\n", f, is)
		}
		verdict := "valid FHIR R4"
		if !r.Valid {
			verdict = "invalid"
		}
		warnings := plural(r.Warnings, "warning")
		if r.Warnings >= fhir.MaxWarnings {
			warnings = fmt.Sprintf("%d+ warnings (only the first %d are reported)", fhir.MaxWarnings, fhir.MaxWarnings)
		}
		fmt.Fprintf(e.stdout, "%s: %s: %s, %s\n", f, verdict, plural(r.Errors, "error"), warnings)
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			fmt.Fprintf(e.stderr, "acds fhir validate: %v\n", err)
			return 2
		}
	}
	switch {
	case unreadable:
		return 2
	case invalid:
		return 1
	}
	return 0
}

// plural is "1 error", "0 errors", "170 warnings".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func fhirFmt(args []string, e env) int {
	fs := flag.NewFlagSet("acds fhir fmt", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	deid := fs.Bool("deidentify", false, "de-identify (HIPAA Safe Harbor): the fhir_r4_deidentified output format")
	keyFile := fs.String("key-file", "", "file holding the de-identification HMAC key (at least 32 bytes, used as is); without it a random per-run key is used, so pseudonyms differ between runs")
	source := fs.String("source", "raw", "source recorded in the Provenance: a portal host, or raw")
	setUsage(fs, help{usage: []string{"acds fhir fmt FILE [--deidentify [--key-file F]] [--source HOST]"},
		about: `
Validates FILE (- for standard input) as FHIR R4 JSON and prints its normalised
canonical JSON: a collection Bundle with a Provenance, de-identified with --deidentify.`,
		exit: "0 printed, 1 invalid FHIR R4, 2 usage error or an unreadable FILE or key file."})
	files, err := parseArgs(fs, args, e.stdout)
	if err != nil {
		return parseExit(err)
	}
	if len(files) != 1 {
		fmt.Fprintf(e.stderr, "acds fhir fmt: want one FILE; got %d\n", len(files))
		fs.Usage()
		return 2
	}
	if *keyFile != "" && !*deid {
		fmt.Fprintln(e.stderr, "acds fhir fmt: --key-file only applies with --deidentify")
		return 2
	}
	data, err := fhirRead(files[0], e.stdin)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds fhir fmt: %s: %v\n", files[0], err)
		return 2
	}
	opts := fhir.Options{Format: acds.OutputFHIRR4, Source: *source, Now: time.Now()}
	if m, err := sim.MeasureSelf(); err == nil {
		opts.Measurement = hex.EncodeToString(m)
	}
	if *deid {
		opts.Format = acds.OutputFHIRR4Deidentified
		if *keyFile != "" {
			k, err := os.ReadFile(*keyFile)
			if err != nil {
				fmt.Fprintf(e.stderr, "acds fhir fmt: reading the key: %v\n", err)
				return 2
			}
			if len(k) < 32 {
				fmt.Fprintf(e.stderr, "acds fhir fmt: the key file %s holds %d bytes; at least 32 are needed\n", *keyFile, len(k))
				return 2
			}
			opts.DeidentKey = k
		} else {
			opts.DeidentKey = make([]byte, 32)
			if _, err := rand.Read(opts.DeidentKey); err != nil {
				fmt.Fprintf(e.stderr, "acds fhir fmt: %v\n", err)
				return 2
			}
			fmt.Fprintln(e.stderr, "acds fhir fmt: pseudonyms use a random per-run key (pass --key-file for repeatable pseudonyms)")
		}
	}
	out, err := fhir.Process(data, opts)
	var invalid *fhir.InvalidError
	switch {
	case errors.As(err, &invalid):
		for _, is := range invalid.Outcome.Issues {
			fmt.Fprintf(e.stderr, "%s: %s\n", files[0], is)
		}
		fmt.Fprintf(e.stderr, "acds fhir fmt: %s is not valid FHIR R4\n", files[0])
		return 1
	case err != nil:
		fmt.Fprintf(e.stderr, "acds fhir fmt: %v\n", err)
		return 2
	}
	for _, is := range out.Outcome.Issues {
		if is.Severity == fhir.SeverityWarning && !strings.Contains(is.Diagnostics, "dom-6") {
			fmt.Fprintf(e.stderr, "%s: %s\n", files[0], is)
		}
	}
	if _, err := e.stdout.Write(append(out.JSON, '\n')); err != nil {
		return 2
	}
	return 0
}
