package fhirpath

import "testing"

// TestParseFullDateTime checks the fixed-offset parser of the common
// dateTime form against the general one.
func TestParseFullDateTime(t *testing.T) {
	for _, s := range []string{
		"2015-01-01T10:20:30Z", "2016-05-13T02:42:41+00:00", "2016-05-13T02:42:41-05:30",
		"2016-05-13T02:42:41.5Z", "2016-05-13T02:42:41.123456789+01:00", "2016-05-13T02:42:41.1234567891234Z",
		"2016-02-29T00:00:00Z", "2015-02-29T00:00:00Z", "2016-13-01T00:00:00Z", "2016-05-13T24:00:00Z",
		"2016-05-13T02:60:00Z", "2016-05-13T02:42:61Z", "2016-05-13T02:42:41.Z", "2016-05-13T02:42:41+5:00",
		"2016-05-13T02:42:41", "2016-05-13T02:42:41x", "2016-05-13T02:42", "2016-05-13", "2016",
		"20x6-05-13T02:42:41Z", "2016-05-13T02:42:41.12a", "2016-05-13T02:42:41+15:00",
	} {
		full, okFull := parseFullDateTime(s)
		var general temporal
		date, rest := s, ""
		if i := indexByte(s, 'T'); i >= 0 {
			date, rest = s[:i], s[i+1:]
		}
		okGen := parseDatePart(date, &general)
		if okGen && rest != "" {
			zone := ""
			for i := 0; i < len(rest); i++ {
				if rest[i] == 'Z' || rest[i] == '+' || rest[i] == '-' {
					rest, zone = rest[:i], rest[i:]
					break
				}
			}
			okGen = (rest == "" || parseTimePart(rest, &general)) && parseZone(zone, &general)
		}
		if okFull && (!okGen || full != general) {
			t.Errorf("%s: fixed %+v, general %+v (%v)", s, full, general, okGen)
		}
		got, ok := parseDateTime(s)
		if ok != okGen || ok && got.temporal != general {
			t.Errorf("%s: parseDateTime %+v %v, general %+v %v", s, got, ok, general, okGen)
		}
	}
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}
