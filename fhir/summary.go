package fhir

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Summary describes a Process output: its resources by type and the
// source its Provenance names.
type Summary struct {
	// Counts is the number of entries per resourceType, the Provenance
	// included.
	Counts map[string]int
	// Source is the Provenance's source: the portal host of a notarised
	// fetch, or "raw" for a direct submission (Options.Source).
	Source string
}

// Total is the number of entries, the Provenance included.
func (s Summary) Total() int {
	n := 0
	for _, v := range s.Counts {
		n += v
	}
	return n
}

// String lists the counts, largest first then by type: "12 Observation,
// 3 Condition, 1 Patient, 1 Provenance".
func (s Summary) String() string {
	keys := make([]string, 0, len(s.Counts))
	for k := range s.Counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if s.Counts[keys[i]] != s.Counts[keys[j]] {
			return s.Counts[keys[i]] > s.Counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", s.Counts[k], k)
	}
	return strings.Join(parts, ", ")
}

// ErrNoProvenance: the output has no ACDS Provenance naming its source.
var ErrNoProvenance = errors.New("fhir: no ACDS Provenance names the source")

// Summarize reads back a Process output (a Bundle, JSON): it counts the
// entries by resourceType and returns the source the ACDS Provenance
// names, by the rule Process writes it: the Provenance tagged
// TagSystem#provenance, whose entity identifier has system SourceSystem.
// An output without such a Provenance yields ErrNoProvenance.
func Summarize(output []byte) (Summary, error) {
	var b struct {
		ResourceType string `json:"resourceType"`
		Entry        []struct {
			Resource struct {
				ResourceType string `json:"resourceType"`
				Meta         struct {
					Tag []struct {
						System string `json:"system"`
						Code   string `json:"code"`
					} `json:"tag"`
				} `json:"meta"`
				Entity []struct {
					What struct {
						Identifier struct {
							System string `json:"system"`
							Value  string `json:"value"`
						} `json:"identifier"`
					} `json:"what"`
				} `json:"entity"`
			} `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(output, &b); err != nil {
		return Summary{}, fmt.Errorf("fhir: output: %w", err)
	}
	if b.ResourceType != "Bundle" {
		return Summary{}, fmt.Errorf("fhir: output is a %q, not a Bundle", b.ResourceType)
	}
	s := Summary{Counts: map[string]int{}}
	for _, e := range b.Entry {
		r := &e.Resource
		s.Counts[r.ResourceType]++
		if r.ResourceType != "Provenance" {
			continue
		}
		ours := false
		for _, t := range r.Meta.Tag {
			ours = ours || (t.System == TagSystem && t.Code == "provenance")
		}
		if !ours {
			continue
		}
		for _, en := range r.Entity {
			if en.What.Identifier.System == SourceSystem && en.What.Identifier.Value != "" {
				s.Source = en.What.Identifier.Value
			}
		}
	}
	if s.Source == "" {
		return Summary{}, ErrNoProvenance
	}
	return s, nil
}
