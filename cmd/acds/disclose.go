package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/disclosure"
	"github.com/acds-project/acds/fhir/fhirpath"
	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/verify"
	"github.com/acds-project/acds/verify/report"
)

// refList is a repeatable --select.
type refList []string

func (l *refList) String() string { return strings.Join(*l, ",") }

func (l *refList) Set(s string) error {
	typ, id, ok := strings.Cut(s, "/")
	if !ok || typ == "" || id == "" || strings.Contains(id, "/") {
		return fmt.Errorf("want ResourceType/id, got %q", s)
	}
	*l = append(*l, s)
	return nil
}

// runDisclose writes a disclosure of chosen entries of an attested output
// (DESIGN §8, §9).
//
//	acds disclose (--record FILE | --bundle FILE --output FILE [--key-file FILE]) (--select Type/id… | --where FHIRPATH) [--out FILE]
func runDisclose(ctx context.Context, e env) int {
	flags := flag.NewFlagSet("acds disclose", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	record := flags.String("record", "", "a request record (GET /v1/requests/{id}) or its result, holding output, attestationBundle and disclosureKey; default none: use --bundle, --output and --key-file")
	bundleFile := flags.String("bundle", "", "the attestation bundle (base64 or raw CBOR); default none")
	outputFile := flags.String("output", "", "the output the bundle attests, as saved or pretty-printed; without --key-file, the request record or result that holds it and its disclosureKey; default none")
	keyFile := flags.String("key-file", "", "file holding the result's disclosureKey (base64); default none: taken from --output")
	where := flags.String("where", "", "also disclose every entry whose resource makes this FHIRPath `expression` true; default none")
	out := flags.String("out", "-", "where to write the disclosure")
	var selects refList
	flags.Var(&selects, "select", "disclose the entry whose resource is `Type/id` (repeatable)")
	setUsage(flags, help{usage: []string{
		"acds disclose --record FILE (--select Type/id… | --where FHIRPATH) [--out FILE]",
		"acds disclose --bundle FILE --output FILE [--key-file FILE] (--select Type/id… | --where FHIRPATH) [--out FILE]"},
		about: `
Writes a disclosure of chosen entries of an attested fhir_r4,
fhir_r4_deidentified or fhir_r4_ips output: those entries, their salts and inclusion proofs,
and the attestation bundle whose signed claims commit to all entries. Whoever
receives it checks it offline with ` + "`acds verify --disclosure FILE`" + ` and learns
nothing of the other entries. The disclosure key (the result's disclosureKey)
stays with you: anyone holding it and the output can disclose any entry.`,
		exit: `0 written, 1 nothing matched or the inputs do not belong together,
2 usage error or unreadable input.`})
	args, err := parseArgs(flags, e.args, e.stdout)
	if err != nil {
		return parseExit(err)
	}
	separate := *bundleFile != "" || *outputFile != "" || *keyFile != ""
	why := ""
	switch {
	case len(args) != 0:
		why = fmt.Sprintf("unexpected argument %q (every input is a flag)", args[0])
	case *record != "" && separate:
		why = "--record, or --bundle, --output and --key-file: not both"
	case *record == "" && !separate:
		why = "no input: give --record FILE, or --bundle, --output and --key-file"
	case separate && *bundleFile == "":
		why = "--output and --key-file need --bundle"
	case separate && *outputFile == "":
		why = "--bundle and --key-file need --output"
	case len(selects) == 0 && *where == "":
		why = "nothing to disclose: give --select REF or --where EXPRESSION"
	}
	if why != "" {
		fmt.Fprintln(e.stderr, "acds disclose: "+why)
		flags.Usage()
		return 2
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(e.stderr, "acds disclose: "+format+"\n", a...)
		return code
	}

	var bundle, output, key []byte
	if *record != "" {
		if bundle, output, key, err = readRecord(*record); err != nil {
			return fail(2, "--record: %v", err)
		}
	} else {
		if bundle, err = readBundle(*bundleFile, e.stdin); err != nil {
			return fail(2, "--bundle: %v", err)
		}
		if *keyFile == "" {
			// DESIGN §8's form, --bundle and --output alone: the key
			// that salts the entries is in the request's result, so
			// --output must be the record (or the result) that holds it.
			_, o, k, err := readRecord(*outputFile)
			if err != nil {
				return fail(2, "--output: %v; without --key-file, --output must be the request record (GET /v1/requests/{id}) or its result, which holds the disclosureKey, or give --key-file", err)
			}
			output, key = o, k
		} else {
			raw, err := os.ReadFile(*outputFile)
			if err != nil {
				return fail(2, "--output: %v", err)
			}
			if output, err = acds.OutputBytes(raw); err != nil {
				return fail(2, "--output: %v", err)
			}
			k, err := os.ReadFile(*keyFile)
			if err != nil {
				return fail(2, "--key-file: %v", err)
			}
			if key, err = base64.StdEncoding.DecodeString(strings.TrimSpace(string(k))); err != nil {
				return fail(2, "--key-file: not base64")
			}
		}
	}
	var x *fhirpath.Expression
	if *where != "" {
		if x, err = fhirpath.Compile(*where); err != nil {
			return fail(2, "--where: %v", err)
		}
	}
	if err := disclosure.CheckKey(bundle, output, key); err != nil {
		return fail(1, "%v", err)
	}
	var match func([]byte) (bool, error)
	if x != nil {
		wctx, cancel := context.WithTimeout(ctx, fhirPathTimeout)
		defer cancel()
		match = whereMatch(wctx, x)
	}
	indices, err := disclosure.Select(output, selects, match)
	if errors.Is(err, disclosure.ErrNoMatch) && x != nil && len(selects) == 0 {
		return fail(1, "--where %q matches no entry", x)
	}
	if err != nil {
		return fail(1, "%v", err)
	}
	d, err := disclosure.New(bundle, key, output, indices)
	if err != nil {
		return fail(1, "%v", err)
	}
	js, err := d.Marshal()
	if err != nil {
		return fail(1, "%v", err)
	}
	if *out == "-" {
		_, err = e.stdout.Write(js)
	} else {
		err = os.WriteFile(*out, js, 0o644)
	}
	if err != nil {
		return fail(2, "--out: %v", err)
	}
	for _, x := range d.Entries {
		fmt.Fprintf(e.stderr, "disclosed entry %d: %s\n", x.Index, disclosure.Ref(x.Entry))
	}
	return 0
}

// readRecord reads the bundle, output and key of a request record or a
// result.
func readRecord(name string) (bundle, output, key []byte, err error) {
	raw, err := os.ReadFile(name)
	if err != nil {
		return nil, nil, nil, err
	}
	var rec acds.Request // a record holds a result; a result is read on its own
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, nil, nil, fmt.Errorf("not a request record: %w", err)
	}
	r := rec.Result
	if r == nil {
		r = new(acds.Result)
		if err := json.Unmarshal(raw, r); err != nil {
			return nil, nil, nil, fmt.Errorf("not a request record: %w", err)
		}
	}
	if r.AttestationBundle == "" || len(r.Output) == 0 || r.DisclosureKey == "" {
		return nil, nil, nil, fmt.Errorf("want a completed request's result with output, attestationBundle and disclosureKey")
	}
	if bundle, err = attestation.ReadBundle([]byte(r.AttestationBundle)); err != nil {
		return nil, nil, nil, err
	}
	if output, err = acds.OutputBytes(r.Output); err != nil {
		return nil, nil, nil, err
	}
	if key, err = base64.StdEncoding.DecodeString(r.DisclosureKey); err != nil {
		return nil, nil, nil, fmt.Errorf("disclosureKey is not base64")
	}
	return bundle, output, key, nil
}

// whereMatch is the predicate of --where x on an entry's resource: true
// when x gives true, false when it gives nothing; anything else is an
// error.
func whereMatch(ctx context.Context, x *fhirpath.Expression) func(resource []byte) (bool, error) {
	return func(resource []byte) (bool, error) {
		res, err := r4.Unmarshal(resource)
		if err != nil {
			return false, err
		}
		got, err := x.EvaluateResource(ctx, res, nil)
		if err != nil {
			return false, fmt.Errorf("--where: %w", err)
		}
		switch {
		case len(got) == 0:
			return false, nil
		case len(got) == 1:
			b, ok := got[0].(fhirpath.Boolean)
			if !ok {
				return false, fmt.Errorf("--where gives %s, want a boolean", got[0].TypeName())
			}
			return bool(b), nil
		}
		return false, fmt.Errorf("--where gives %d values, want one boolean", len(got))
	}
}

// verifyDisclosure is `acds verify --disclosure FILE`.
func verifyDisclosure(e env, v *verify.Verifier, name, htmlFile string, asJSON bool, notes []string, selfHash bool) int {
	data, err := readArg(name, e.stdin, disclosure.MaxSize)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds verify: --disclosure: %v\n", err)
		return 2
	}
	res, err := v.VerifyDisclosure(data)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds verify: --disclosure: %v\n", err)
		return 2
	}
	if htmlFile != "" {
		d, err := disclosure.Parse(data) // parsed by VerifyDisclosure already: cannot fail here
		var bundle []byte
		if err == nil {
			bundle, err = d.Bundle()
		}
		if err == nil {
			err = writeReport(htmlFile, report.Input{Result: res, Bundle: bundle, Verifier: v, Notes: notes, Disclosure: true})
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "acds verify: --html: %v\n", err)
			return 2
		}
	}
	return printReport(e, res, asJSON, notes, selfHash)
}

// printClaimsV2 prints the version 2 claims and the disclosed entries of
// a text report.
func printClaimsV2(line func(k, v string), d acds.VerifyDetails) {
	if d.BundleVersion != 0 {
		line("bundleVersion", fmt.Sprint(d.BundleVersion))
	}
	if d.Entries != nil {
		line("entries", fmt.Sprintf("%d committed (root %s)", d.Entries.Count, d.Entries.Root))
	}
	if d.Query != nil {
		line("query", d.Query.Expression)
		line("recordDigest", d.Query.RecordDigest)
	}
	for _, x := range d.Disclosed {
		line("disclosed", fmt.Sprintf("entry %d %s", x.Index, x.Ref))
	}
}
