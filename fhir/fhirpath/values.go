package fhirpath

import (
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Value is one item of a collection: a System value (Boolean, Integer,
// Decimal, String, Date, DateTime, Time, Quantity) or a *Node of the FHIR
// model. Only this package's types implement it.
type Value interface {
	// TypeName returns the value's type, qualified: "System.Integer",
	// "FHIR.HumanName", "FHIR.date", "FHIR.Patient".
	TypeName() string
	isValue()
}

// Collection is an ordered collection of values, the input and result of
// every FHIRPath expression.
type Collection []Value

// Boolean is a System.Boolean.
type Boolean bool

// Integer is a System.Integer (System.Long literals share it).
type Integer int64

// String is a System.String.
type String string

// Decimal is a System.Decimal: an exact rational value with the number of
// decimal places it was written or computed with (its precision).
type Decimal struct {
	r     *big.Rat
	scale int
}

// Quantity is a System.Quantity: a decimal value and a unit, either a UCUM
// code ("mg", "wk", "1") or a calendar duration keyword ("year", "month",
// "week", "day", "hour", "minute", "second", "millisecond").
type Quantity struct {
	Value Decimal
	Unit  string
}

func (Boolean) isValue()  {}
func (Integer) isValue()  {}
func (String) isValue()   {}
func (Decimal) isValue()  {}
func (Quantity) isValue() {}

// TypeName returns "System.Boolean".
func (Boolean) TypeName() string { return "System.Boolean" }

// TypeName returns "System.Integer".
func (Integer) TypeName() string { return "System.Integer" }

// TypeName returns "System.String".
func (String) TypeName() string { return "System.String" }

// TypeName returns "System.Decimal".
func (Decimal) TypeName() string { return "System.Decimal" }

// TypeName returns "System.Quantity".
func (Quantity) TypeName() string { return "System.Quantity" }

// NewDecimal parses a decimal in FHIR/FHIRPath lexical form ("1.50",
// "-3", "1e3" is not accepted).
func NewDecimal(s string) (Decimal, bool) { return parseDecimal(s) }

func parseDecimal(s string) (Decimal, bool) {
	t := s
	if t == "" {
		return Decimal{}, false
	}
	if t[0] == '-' || t[0] == '+' {
		t = t[1:]
	}
	scale := 0
	if i := strings.IndexByte(t, '.'); i >= 0 {
		scale = len(t) - i - 1
		if scale == 0 || i == 0 {
			return Decimal{}, false
		}
	}
	if t == "" || strings.IndexFunc(t, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') }) >= 0 || strings.Count(t, ".") > 1 {
		// FHIR JSON decimals may carry an exponent.
		if strings.ContainsAny(t, "eE") {
			r, ok := new(big.Rat).SetString(s)
			if !ok {
				return Decimal{}, false
			}
			return Decimal{r: r, scale: fracDigits(r)}, true
		}
		return Decimal{}, false
	}
	if len(s) > 400 {
		return Decimal{}, false
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return Decimal{}, false
	}
	return Decimal{r: r, scale: scale}, true
}

// fracDigits is the number of decimal places needed for r, capped at 8.
func fracDigits(r *big.Rat) int {
	for d := 0; d <= 8; d++ {
		x := new(big.Rat).Mul(r, new(big.Rat).SetInt(pow10(d)))
		if x.IsInt() {
			return d
		}
	}
	return 8
}

func pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }

func parseInteger(s string) (Integer, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return Integer(n), err == nil
}

func decFromInt(n int64) Decimal { return Decimal{r: new(big.Rat).SetInt64(n)} }

func decFromFloat(f float64) (Decimal, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Decimal{}, false
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	// Keep at most 15 significant digits: float results are not exact.
	d, ok := parseDecimal(strconv.FormatFloat(f, 'g', 15, 64))
	if !ok {
		d, ok = parseDecimal(s)
	}
	if ok && d.scale > 15 {
		d = d.roundTo(15)
	}
	return d.trim(), ok
}

func toDecimal(v Value) Decimal {
	switch x := v.(type) {
	case Integer:
		return decFromInt(int64(x))
	case Decimal:
		return x
	}
	return decFromInt(0)
}

func (d Decimal) rat() *big.Rat {
	if d.r == nil {
		return new(big.Rat)
	}
	return d.r
}

// Scale returns the number of decimal places of d's precision.
func (d Decimal) Scale() int { return d.scale }

// Rat returns d's exact value (a copy).
func (d Decimal) Rat() *big.Rat { return new(big.Rat).Set(d.rat()) }

// Float64 returns d as the nearest float64.
func (d Decimal) Float64() float64 { f, _ := d.rat().Float64(); return f }

// String writes d with its precision's decimal places ("1.50").
func (d Decimal) String() string {
	r := d.rat()
	if r.IsInt() && d.scale == 0 {
		return r.Num().String()
	}
	sc := d.scale
	if !r.IsInt() && sc == 0 {
		sc = fracDigits(r)
	}
	return r.FloatString(sc)
}

func (d Decimal) neg() Decimal { return Decimal{r: new(big.Rat).Neg(d.rat()), scale: d.scale} }

func (d Decimal) add(e Decimal) Decimal {
	return Decimal{r: new(big.Rat).Add(d.rat(), e.rat()), scale: max(d.scale, e.scale)}
}

func (d Decimal) sub(e Decimal) Decimal {
	return Decimal{r: new(big.Rat).Sub(d.rat(), e.rat()), scale: max(d.scale, e.scale)}
}

func (d Decimal) mul(e Decimal) Decimal {
	return Decimal{r: new(big.Rat).Mul(d.rat(), e.rat()), scale: min(d.scale+e.scale, 28)}.bounded()
}

// maxString bounds the strings an evaluation builds (16 MiB).
const maxString = 16 << 20

// decimalLimit is 10^28, past the range of System.Decimal.
var decimalLimit = new(big.Rat).SetInt(pow10(28))

// outOfRange reports a value whose magnitude reaches 10^28.
func (d Decimal) outOfRange() bool {
	r := d.rat()
	if r.Num().BitLen()-r.Denom().BitLen() < 90 {
		return false
	}
	return new(big.Rat).Abs(r).Cmp(decimalLimit) >= 0
}

// bounded keeps a computed value's exact form from growing without bound:
// past 28 decimal places it is rounded to 28.
func (d Decimal) bounded() Decimal {
	if r := d.rat(); r.Denom().BitLen() > 96 && !r.IsInt() {
		return d.roundTo(28).trimTo(d.scale)
	}
	return d
}

// trimTo keeps scale as the precision when it is coarser.
func (d Decimal) trimTo(scale int) Decimal {
	if scale < d.scale {
		d.scale = max(scale, min(d.scale, fracDigits(d.rat())))
	}
	return d
}

// div divides; ok is false for division by zero. The result keeps up to
// 8 decimal places beyond what an exact quotient needs.
func (d Decimal) div(e Decimal) (Decimal, bool) {
	if e.rat().Sign() == 0 {
		return Decimal{}, false
	}
	q := new(big.Rat).Quo(d.rat(), e.rat())
	res := Decimal{r: q, scale: fracDigits(q)}
	if res.scale == 8 {
		res = res.roundTo(8)
	}
	return res, true
}

func (d Decimal) cmp(e Decimal) int { return d.rat().Cmp(e.rat()) }

func (d Decimal) isInt() bool { return d.rat().IsInt() }

// roundTo rounds half away from zero to n decimal places.
func (d Decimal) roundTo(n int) Decimal {
	r := d.rat()
	m := new(big.Rat).Mul(r, new(big.Rat).SetInt(pow10(n)))
	num, den := new(big.Int).Set(m.Num()), m.Denom()
	neg := num.Sign() < 0
	num.Abs(num)
	q, rem := new(big.Int).QuoRem(num, den, new(big.Int))
	if new(big.Int).Mul(rem, big.NewInt(2)).Cmp(den) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if neg {
		q.Neg(q)
	}
	return Decimal{r: new(big.Rat).SetFrac(q, pow10(n)), scale: n}
}

// truncInt returns the integer part (toward zero).
func (d Decimal) truncInt() *big.Int {
	r := d.rat()
	return new(big.Int).Quo(r.Num(), r.Denom())
}

// floorInt returns the largest integer ≤ d.
func (d Decimal) floorInt() *big.Int {
	r := d.rat()
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	_ = m
	return q // DivMod is Euclidean: floor for a positive denominator
}

// trim drops trailing zero decimal places.
func (d Decimal) trim() Decimal {
	d.scale = min(d.scale, fracDigits(d.rat()))
	return d
}

// Date, DateTime and Time.

// Precision is how much of a date or time is known.
type Precision uint8

// The precisions, coarsest first.
const (
	Year Precision = iota + 1
	Month
	Day
	Hour
	Minute
	Second
	Millisecond
)

// temporal is the common representation of Date, DateTime and Time.
type temporal struct {
	Year, Month, Day     int
	Hour, Minute, Second int
	Nanosecond           int
	Precision            Precision
	// HasZone reports a time zone; ZoneOffset is its offset from UTC in
	// seconds.
	HasZone    bool
	ZoneOffset int
	// fracDigits is the number of fraction-of-second digits written.
	fracDigits int
}

// Date is a System.Date, precise to the year, month or day.
type Date struct{ temporal }

// DateTime is a System.DateTime, precise to anything from the year to the
// millisecond, with or without a time zone.
type DateTime struct{ temporal }

// Time is a System.Time, precise to the hour, minute, second or
// millisecond.
type Time struct{ temporal }

func (Date) isValue()     {}
func (DateTime) isValue() {}
func (Time) isValue()     {}

// TypeName returns "System.Date".
func (Date) TypeName() string { return "System.Date" }

// TypeName returns "System.DateTime".
func (DateTime) TypeName() string { return "System.DateTime" }

// TypeName returns "System.Time".
func (Time) TypeName() string { return "System.Time" }

// String writes the date as FHIR does: 2012, 2012-04, 2012-04-15.
func (d Date) String() string { return d.dateString() }

// String writes the date and time as FHIR does.
func (d DateTime) String() string {
	s := d.dateString()
	if d.Precision >= Hour {
		s += "T" + d.timeString()
	} else if d.Precision == 0 {
		return s
	}
	if d.HasZone && d.Precision >= Hour {
		s += zoneString(d.ZoneOffset)
	}
	return s
}

// String writes the time as FHIR does: 10, 10:30, 10:30:00, 10:30:00.500.
func (t Time) String() string { return t.timeString() }

func (t temporal) dateString() string {
	var b strings.Builder
	b.WriteString(pad(t.Year, 4))
	if t.Precision >= Month {
		b.WriteString("-" + pad(t.Month, 2))
	}
	if t.Precision >= Day {
		b.WriteString("-" + pad(t.Day, 2))
	}
	return b.String()
}

func (t temporal) timeString() string {
	s := pad(t.Hour, 2)
	if t.Precision >= Minute {
		s += ":" + pad(t.Minute, 2)
	}
	if t.Precision >= Second {
		s += ":" + pad(t.Second, 2)
	}
	if t.Precision >= Millisecond {
		n := t.fracDigits
		if n == 0 {
			n = 3
		}
		f := pad(t.Nanosecond, 9)
		if n > 9 {
			n = 9
		}
		s += "." + f[:n]
	}
	return s
}

func zoneString(off int) string {
	if off == 0 {
		return "Z"
	}
	sign := "+"
	if off < 0 {
		sign = "-"
		off = -off
	}
	return sign + pad(off/3600, 2) + ":" + pad(off/60%60, 2)
}

func pad(n, w int) string {
	s := strconv.Itoa(n)
	for len(s) < w {
		s = "0" + s
	}
	return s
}

// parseDateTimeLiteral parses the text of an @ literal (without the @).
func parseDateTimeLiteral(s string) (Value, error) {
	if strings.HasPrefix(s, "T") {
		t, ok := parseTime(s[1:])
		if !ok {
			return nil, errInvalidTemporal
		}
		return t, nil
	}
	if i := strings.IndexByte(s, 'T'); i >= 0 {
		dt, ok := parseDateTime(s)
		if !ok {
			return nil, errInvalidTemporal
		}
		return dt, nil
	}
	d, ok := parseDate(s)
	if !ok {
		return nil, errInvalidTemporal
	}
	return d, nil
}

var errInvalidTemporal = evalErr(ErrSyntax, -1, "invalid date/time")

func atoiN(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// parseDatePart parses YYYY, YYYY-MM or YYYY-MM-DD into t.
func parseDatePart(s string, t *temporal) bool {
	var buf [4]string
	parts := splitInto(buf[:0], s, '-')
	if len(parts) > 3 || len(parts[0]) != 4 {
		return false
	}
	var ok bool
	if t.Year, ok = atoiN(parts[0]); !ok {
		return false
	}
	t.Precision = Year
	t.Month, t.Day = 1, 1
	if len(parts) > 1 {
		if len(parts[1]) != 2 {
			return false
		}
		if t.Month, ok = atoiN(parts[1]); !ok || t.Month < 1 || t.Month > 12 {
			return false
		}
		t.Precision = Month
	}
	if len(parts) > 2 {
		if len(parts[2]) != 2 {
			return false
		}
		if t.Day, ok = atoiN(parts[2]); !ok || t.Day < 1 || t.Day > daysIn(t.Year, t.Month) {
			return false
		}
		t.Precision = Day
	}
	return true
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// parseTimePart parses HH, HH:MM, HH:MM:SS or HH:MM:SS.fff into t.
func parseTimePart(s string, t *temporal) bool {
	frac := ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		s, frac = s[:i], s[i+1:]
		if frac == "" {
			return false
		}
	}
	var buf [4]string
	parts := splitInto(buf[:0], s, ':')
	if len(parts) > 3 {
		return false
	}
	vals := [3]*int{&t.Hour, &t.Minute, &t.Second}
	lim := [3]int{23, 59, 59}
	for i, p := range parts {
		n, ok := atoiN(p)
		if !ok || len(p) != 2 || n > lim[i] {
			return false
		}
		*vals[i] = n
		t.Precision = Hour + Precision(i)
	}
	if frac != "" {
		if len(parts) != 3 {
			return false
		}
		n, ok := atoiN(frac)
		if !ok {
			return false
		}
		d := len(frac)
		for i := d; i < 9; i++ {
			n *= 10
		}
		for i := d; i > 9; i-- {
			n /= 10
		}
		t.Nanosecond = n
		t.fracDigits = d
		t.Precision = Millisecond
	}
	return true
}

func parseZone(s string, t *temporal) bool {
	if s == "" {
		return true
	}
	if s == "Z" {
		t.HasZone, t.ZoneOffset = true, 0
		return true
	}
	if len(s) != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':' {
		return false
	}
	h, ok1 := atoiN(s[1:3])
	m, ok2 := atoiN(s[4:6])
	if !ok1 || !ok2 || h > 14 || m > 59 {
		return false
	}
	t.HasZone, t.ZoneOffset = true, h*3600+m*60
	if s[0] == '-' {
		t.ZoneOffset = -t.ZoneOffset
	}
	return true
}

func parseDate(s string) (Date, bool) {
	var t temporal
	if !parseDatePart(s, &t) {
		return Date{}, false
	}
	return Date{t}, true
}

// parseDateTime parses a FHIR dateTime or instant, or a FHIRPath DateTime
// literal body (which may end in a bare T).
func parseDateTime(s string) (DateTime, bool) {
	if t, ok := parseFullDateTime(s); ok {
		return DateTime{t}, true
	}
	var t temporal
	date, rest := s, ""
	if i := strings.IndexByte(s, 'T'); i >= 0 {
		date, rest = s[:i], s[i+1:]
	}
	if !parseDatePart(date, &t) {
		return DateTime{}, false
	}
	if rest == "" {
		return DateTime{t}, true
	}
	zone := ""
	if i := strings.IndexAny(rest, "Z+-"); i >= 0 {
		rest, zone = rest[:i], rest[i:]
	}
	if rest != "" && !parseTimePart(rest, &t) {
		return DateTime{}, false
	}
	if !parseZone(zone, &t) {
		return DateTime{}, false
	}
	return DateTime{t}, true
}

func parseTime(s string) (Time, bool) {
	var t temporal
	if !parseTimePart(s, &t) {
		return Time{}, false
	}
	return Time{t}, true
}

// splitInto is strings.Split into dst, without allocating when dst has
// room; it stops after cap(dst) parts (the last holding the rest), enough
// to tell that there are too many.
func splitInto(dst []string, s string, sep byte) []string {
	for len(dst) < cap(dst)-1 {
		i := strings.IndexByte(s, sep)
		if i < 0 {
			break
		}
		dst = append(dst, s[:i])
		s = s[i+1:]
	}
	return append(dst, s)
}

// parseFullDateTime parses the common form of a dateTime or instant,
// YYYY-MM-DDThh:mm:ss with an optional fraction and zone, at fixed
// offsets; ok is false for any other text (which parseDateTime then
// parses in general, to the same result for this form).
func parseFullDateTime(s string) (t temporal, ok bool) {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return t, false
	}
	hi, ok1 := digits2(s, 0)
	lo, ok2 := digits2(s, 2)
	var ok3, ok4, ok5, ok6, ok7 bool
	t.Year = hi*100 + lo
	t.Month, ok3 = digits2(s, 5)
	t.Day, ok4 = digits2(s, 8)
	t.Hour, ok5 = digits2(s, 11)
	t.Minute, ok6 = digits2(s, 14)
	t.Second, ok7 = digits2(s, 17)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || t.Month < 1 || t.Month > 12 || t.Day < 1 || t.Day > daysIn(t.Year, t.Month) ||
		t.Hour > 23 || t.Minute > 59 || t.Second > 59 {
		return t, false
	}
	t.Precision = Second
	rest := s[19:]
	if len(rest) > 0 && rest[0] == '.' {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		frac := rest[1:i]
		if frac == "" || len(frac) > 18 {
			return t, false
		}
		n, _ := atoiN(frac)
		for d := len(frac); d < 9; d++ {
			n *= 10
		}
		for d := len(frac); d > 9; d-- {
			n /= 10
		}
		t.Nanosecond, t.fracDigits, t.Precision = n, len(frac), Millisecond
		rest = rest[i:]
	}
	if !parseZone(rest, &t) {
		return t, false
	}
	return t, true
}

// digits2 reads the two decimal digits at s[i:i+2].
func digits2(s string, i int) (int, bool) {
	a, b := s[i]-'0', s[i+1]-'0'
	return int(a)*10 + int(b), a <= 9 && b <= 9
}
