package fhir

import (
	"regexp"
	"strings"
)

// Free text that de-identification keeps (terminology text: Coding.display,
// CodeableConcept.text, units) may still hold dates and numbers written by
// a person ("ROS 5 days - 2013-04-10"). scrubText reduces every date in it
// to its year, as the date rules do for date elements (the year 90 years
// back for older ones), and removes every number that could be an
// identifier: a run of seven or more digits, alone or split by spaces,
// dashes, dots, slashes or parentheses (telephone, social security, record
// and account numbers).

var (
	// textDate matches the dates people write: ISO (2013-04-10, with a
	// time), numeric with slashes or dots (04/10/2013, 10.04.2013, 4/10/13)
	// and with month names (April 10, 2013; 10 Apr 2013; Apr 2013).
	textDate = regexp.MustCompile(`(?i)\b(1[89]\d{2}|20\d{2})-\d{1,2}-\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b|` +
		`\b\d{1,2}[/.]\d{1,2}[/.](\d{4}|\d{2})\b|` +
		`\b(?:\d{1,2}(?:st|nd|rd|th)?\s+)?(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?(?:\s+\d{1,2}(?:st|nd|rd|th)?)?,?\s+(\d{4})\b|` +
		`\b(1[89]\d{2}|20\d{2})-(?:0[1-9]|1[0-2])\b`)
	// textNumber matches a run of digits with separators that holds seven
	// digits or more.
	textNumber = regexp.MustCompile(`\(?\d[\d\-./() ]{5,}\d`)
	// yearRange is a span of years ("2019-2020 formula"), which is not a
	// number of the individual and is kept.
	yearRange = regexp.MustCompile(`^(1[89]|20)\d{2}-(1[89]|20)\d{2}$`)
)

// scrubText returns s with dates reduced to their years and
// identifier-like numbers removed; "" when nothing but separators is left.
func (d *safeHarbor) scrubText(s string) string {
	if !strings.ContainsAny(s, "0123456789") {
		return s
	}
	out := replaceTextDates(s, func(m string) string {
		sub := textDate.FindStringSubmatch(m)
		year := ""
		for _, g := range sub[1:] {
			if g != "" {
				year = g
			}
		}
		if len(year) != 4 {
			return "" // a two-digit year: the whole date goes
		}
		if y, ok := d.dateYear(year); ok {
			return fourDigits(y)
		}
		return ""
	})
	out = textNumber.ReplaceAllStringFunc(out, func(m string) string {
		if len(digitsOnly(m)) >= 7 && !yearRange.MatchString(m) {
			return ""
		}
		return m
	})
	if out == s {
		return s
	}
	out = strings.Join(strings.Fields(out), " ")
	if strings.Trim(out, " -/.,;:()") == "" {
		return ""
	}
	return out
}

// textDates returns the spans of the dates written in s: the matches of
// textDate that are not part of a longer dotted or dashed number (an OID
// such as 2.16.840.1.113883.4.3.25 holds "4.3.25").
func textDates(s string) [][]int {
	var out [][]int
	for _, m := range textDate.FindAllStringIndex(s, -1) {
		if m[0] > 0 && partOfNumber(s[m[0]-1]) || m[1] < len(s) && partOfNumber(s[m[1]]) {
			continue
		}
		out = append(out, m)
	}
	return out
}

func partOfNumber(c byte) bool { return c >= '0' && c <= '9' || c == '.' || c == '/' || c == '-' }

// replaceTextDates replaces every date textDates finds in s by fn of it.
func replaceTextDates(s string, fn func(string) string) string {
	spans := textDates(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range spans {
		b.WriteString(s[last:m[0]])
		b.WriteString(fn(s[m[0]:m[1]]))
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}
