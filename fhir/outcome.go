package fhir

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Severity is the severity of an OperationOutcome issue.
type Severity string

// The issue severities, as in the FHIR issue-severity code system.
const (
	SeverityFatal       Severity = "fatal"
	SeverityError       Severity = "error"
	SeverityWarning     Severity = "warning"
	SeverityInformation Severity = "information"
)

// Issue is one finding of validation: an OperationOutcome.issue.
type Issue struct {
	Severity    Severity `json:"severity"`
	Code        string   `json:"code"` // FHIR issue-type: structure, required, value, invariant, code-invalid, not-found, processing, not-supported…
	Diagnostics string   `json:"diagnostics,omitempty"`
	Expression  []string `json:"expression,omitempty"` // FHIRPath location, e.g. Patient.name[0].given[1]
}

// String renders the issue on one line: "error @ Patient.birthDate: …".
func (i Issue) String() string {
	loc := strings.Join(i.Expression, ", ")
	if loc == "" {
		loc = "(document)"
	}
	return fmt.Sprintf("%s @ %s: %s", i.Severity, loc, i.Diagnostics)
}

// OperationOutcome is the result of validation. It marshals as a FHIR R4
// OperationOutcome resource. The zero value has no issues.
type OperationOutcome struct {
	Issues []Issue
}

// ErrorCount returns the number of issues of severity error or fatal.
func (o *OperationOutcome) ErrorCount() int {
	if o == nil {
		return 0
	}
	n := 0
	for _, i := range o.Issues {
		if i.Severity == SeverityError || i.Severity == SeverityFatal {
			n++
		}
	}
	return n
}

// HasErrors reports whether any issue is an error or fatal.
func (o *OperationOutcome) HasErrors() bool { return o.ErrorCount() > 0 }

// MarshalJSON encodes o as a FHIR OperationOutcome resource. FHIR requires
// at least one issue, so an outcome without findings carries one
// informational "no issues detected".
func (o *OperationOutcome) MarshalJSON() ([]byte, error) {
	issues := o.Issues
	if len(issues) == 0 {
		issues = []Issue{{Severity: SeverityInformation, Code: "informational", Diagnostics: "no issues detected"}}
	}
	return json.Marshal(struct {
		ResourceType string  `json:"resourceType"`
		Issue        []Issue `json:"issue"`
	}{"OperationOutcome", issues})
}

// UnmarshalJSON decodes a FHIR OperationOutcome resource.
func (o *OperationOutcome) UnmarshalJSON(b []byte) error {
	var v struct {
		ResourceType string  `json:"resourceType"`
		Issue        []Issue `json:"issue"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.ResourceType != "OperationOutcome" {
		return fmt.Errorf("fhir: resourceType %q is not OperationOutcome", v.ResourceType)
	}
	o.Issues = v.Issue
	return nil
}
