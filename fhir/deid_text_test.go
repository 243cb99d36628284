package fhir

import (
	"testing"
	"time"
)

// TestScrubText: dates in kept free text are reduced to their years (the
// year 90 years back for older ones), identifier-like numbers go, and
// terminology text without them is left alone.
func TestScrubText(t *testing.T) {
	d := &safeHarbor{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for in, want := range map[string]string{
		"ROS 5 days - 2013-04-10":                    "ROS 5 days - 2013",
		"seen 2013-04-10T10:30:00-05:00 by clinic":   "seen 2013 by clinic",
		"follow-up on 04/10/2013":                    "follow-up on 2013",
		"follow-up on 4/10/13":                       "follow-up on",
		"10.04.2013 review":                          "2013 review",
		"Review April 10, 2013":                      "Review 2013",
		"review on 10th Apr 2013":                    "review on 2013",
		"since Mar 2013":                             "since 2013",
		"since 2013-04":                              "since 2013",
		"born 1920-05-06":                            "born 1936",
		"call 555-867-5309 or (555) 867 5309":        "call or",
		"MRN 12345678":                               "MRN",
		"SSN 999-12-3456":                            "SSN",
		"2013-04-10":                                 "2013",
		"on 3/4/21":                                  "on",
		"Hemoglobin A1c/Hemoglobin.total in Blood":   "Hemoglobin A1c/Hemoglobin.total in Blood",
		"24 HR Metformin hydrochloride 500 MG":       "24 HR Metformin hydrochloride 500 MG",
		"LOINC 4548-4 panel":                         "LOINC 4548-4 panel",
		"0.5 ML Influenza vaccine 2019-2020 formula": "0.5 ML Influenza vaccine 2019-2020 formula",
		"Marker 2013 study":                          "Marker 2013 study",
		"OID 1.2.3.25 v":                             "OID 1.2.3.25 v",
	} {
		if got := d.scrubText(in); got != want {
			t.Errorf("scrubText(%q) = %q, want %q", in, got, want)
		}
	}
}
