package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/acds-project/acds/fhir/fhirpath"
	"github.com/acds-project/acds/fhir/r4"
)

// fhirPathTimeout bounds one evaluation of `acds fhir path`.
const fhirPathTimeout = 30 * time.Second

// fhirPath evaluates a FHIRPath expression on a resource or Bundle (DESIGN
// §8):
//
//	acds fhir path EXPRESSION FILE
//
// It prints the result collection as a JSON array (fhirpath.MarshalJSON:
// primitives as JSON values, complex elements and Quantity as their FHIR
// JSON) and exits 0; 1 on an evaluation error; 2 on a usage error, an
// expression that is wrong whatever the input (it does not parse, or names
// an unknown function or environment variable: a static error), or an
// input that cannot be read or is not FHIR R4 JSON.
func fhirPath(ctx context.Context, args []string, e env) int {
	fs := flag.NewFlagSet("acds fhir path", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	setUsage(fs, help{usage: []string{"acds fhir path EXPRESSION FILE"},
		about: `
Evaluates a FHIRPath expression on a FHIR R4 resource or Bundle (FILE, or - for
standard input) and prints the result collection as a JSON array: primitives as
JSON values, complex elements and Quantity as their FHIR JSON.`,
		exit: `0 evaluated, 1 evaluation error, 2 usage error, an expression that
does not parse or names an unknown function or environment variable, or an
input that cannot be read or is not FHIR R4 JSON.`})
	pos, err := parseArgs(fs, args, e.stdout)
	if err != nil {
		return parseExit(err)
	}
	if len(pos) != 2 {
		fmt.Fprintln(e.stderr, "acds fhir path: want EXPRESSION and FILE")
		fs.Usage()
		return 2
	}
	expr, name := pos[0], pos[1]
	x, err := fhirpath.Compile(expr)
	if err == nil {
		// The evaluation below has no Env (nil): the built-in variables
		// only. Any other is a static error, found before reading FILE.
		err = x.CheckEnv(nil)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "acds fhir path: %v\n", err)
		return 2
	}
	data, err := fhirRead(name, e.stdin)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds fhir path: %s: %v\n", name, err)
		return 2
	}
	res, err := r4.Unmarshal(data)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds fhir path: %s: not FHIR R4 JSON: %v\n", name, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, fhirPathTimeout)
	defer cancel()
	out, err := x.EvaluateResource(ctx, res, nil)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds fhir path: %v\n", err)
		return 1
	}
	js, err := fhirpath.MarshalJSON(out)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds fhir path: encoding the result: %v\n", err)
		return 1
	}
	fmt.Fprintf(e.stdout, "%s\n", js)
	return 0
}
