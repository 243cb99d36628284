package fhirpath

import (
	"bytes"
	"encoding/json"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/acds-project/acds/fhir/r4"
)

// valueEqual is FHIRPath equality of two items; known is false when the
// answer is empty (dates of different precision, quantities of
// incomparable units).
func valueEqual(a, b Value) (eq, known bool, err error) {
	// A string-valued primitive against a String, the common case of
	// code = 'x', compares the text without converting the node.
	if s, ok := b.(String); ok {
		if n, ok := a.(*Node); ok {
			if t, isStr, has := nodeText(n); isStr {
				return has && t == string(s), has, nil
			}
		}
	} else if s, ok := a.(String); ok {
		if n, ok := b.(*Node); ok {
			if t, isStr, has := nodeText(n); isStr {
				return has && t == string(s), has, nil
			}
		}
	}
	a, aok := toSystem(a)
	b, bok := toSystem(b)
	if !aok || !bok {
		return false, false, nil
	}
	switch x := a.(type) {
	case Boolean:
		y, ok := b.(Boolean)
		return ok && x == y, true, nil
	case String:
		y, ok := b.(String)
		return ok && x == y, true, nil
	case Integer, Decimal:
		if !isNumeric(b) {
			return false, true, nil
		}
		return toDecimal(a).cmp(toDecimal(b)) == 0, true, nil
	case Quantity:
		y, ok := b.(Quantity)
		if !ok {
			return false, true, nil
		}
		c, known := quantityCompare(x, y, false)
		return c == 0, known, nil
	case Date, DateTime, Time:
		c, known, ok := temporalCompare(a, b)
		if !ok {
			return false, true, nil
		}
		return c == 0, known, nil
	case *Node:
		y, ok := b.(*Node)
		if !ok {
			return false, true, nil
		}
		if x.Value == y.Value {
			return true, true, nil
		}
		return nodeJSONEqual(x, y), true, nil
	}
	return false, true, nil
}

// nodeJSONEqual compares complex elements member by member, through
// their JSON form.
func nodeJSONEqual(a, b *Node) bool {
	ja, ea := nodeJSON(a)
	jb, eb := nodeJSON(b)
	return ea == nil && eb == nil && bytes.Equal(ja, jb)
}

func nodeJSON(n *Node) ([]byte, error) {
	if r, ok := n.Value.(r4.Resource); ok {
		return r4.MarshalCanonical(r)
	}
	if m, ok := n.Value.(json.Marshaler); ok {
		return m.MarshalJSON()
	}
	return nil, evalErr(ErrEvaluation, -1, "cannot compare %s", n.Type)
}

// collEqual is the = operator on collections.
func collEqual(l, r Collection) (eq, known bool, err error) {
	if len(l) == 0 || len(r) == 0 {
		return false, false, nil
	}
	if len(l) != len(r) {
		return false, true, nil
	}
	allKnown := true
	for i := range l {
		eq, known, err := valueEqual(l[i], r[i])
		if err != nil {
			return false, false, err
		}
		if !known {
			allKnown = false
			continue
		}
		if !eq {
			return false, true, nil
		}
	}
	return true, allKnown, nil
}

// collEquivalent is the ~ operator on collections: order does not matter.
func collEquivalent(l, r Collection) bool {
	if len(l) != len(r) {
		return false
	}
	used := make([]bool, len(r))
outer:
	for _, a := range l {
		for j, b := range r {
			if !used[j] && valueEquivalent(a, b) {
				used[j] = true
				continue outer
			}
		}
		return false
	}
	return true
}

func normSpace(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), unicode.IsSpace), " ")
}

// valueEquivalent is FHIRPath equivalence of two items.
func valueEquivalent(a, b Value) bool {
	a, aok := toSystem(a)
	b, bok := toSystem(b)
	if !aok || !bok {
		return aok == bok
	}
	switch x := a.(type) {
	case String:
		y, ok := b.(String)
		return ok && normSpace(string(x)) == normSpace(string(y))
	case Integer, Decimal:
		if !isNumeric(b) {
			return false
		}
		da, db := toDecimal(a), toDecimal(b)
		p := min(da.scale, db.scale)
		return da.roundTo(p).cmp(db.roundTo(p)) == 0
	case Quantity:
		y, ok := b.(Quantity)
		if !ok {
			return false
		}
		c, known := quantityCompare(x, y, true)
		return known && c == 0
	case Date, DateTime, Time:
		c, known, ok := temporalCompare(a, b)
		return ok && known && c == 0
	case *Node:
		if _, ok := b.(*Node); !ok {
			return false
		}
	}
	eq, known, _ := valueEqual(a, b)
	return known && eq
}

// compare orders two System values: known is false for dates of
// different precision; an error for values that cannot be compared.
func compare(a, b Value, at int) (int, bool, error) {
	if x, ok := a.(Integer); ok {
		if y, ok := b.(Integer); ok {
			// Integers need no decimal arithmetic.
			switch {
			case x < y:
				return -1, true, nil
			case x > y:
				return 1, true, nil
			}
			return 0, true, nil
		}
	}
	switch x := a.(type) {
	case Integer, Decimal:
		if isNumeric(b) {
			return toDecimal(a).cmp(toDecimal(b)), true, nil
		}
	case String:
		if y, ok := b.(String); ok {
			return strings.Compare(string(x), string(y)), true, nil
		}
	case Quantity:
		if y, ok := b.(Quantity); ok {
			c, known := quantityCompare(x, y, false)
			if !known {
				return 0, false, evalErr(ErrEvaluation, at, "cannot compare %s with %s", x.Unit, y.Unit)
			}
			return c, true, nil
		}
	case Date, DateTime, Time:
		if c, known, ok := temporalCompare(a, b); ok {
			return c, known, nil
		}
	}
	return 0, false, evalErr(ErrEvaluation, at, "cannot compare %s with %s", typeName(a), typeName(b))
}

// temporalCompare compares two dates, date-times or times; ok is false
// when they are of kinds that do not compare, known false when the result
// is uncertain (different precision).
func temporalCompare(a, b Value) (c int, known, ok bool) {
	ta, timeA, okA := temporalOf(a)
	tb, timeB, okB := temporalOf(b)
	if !okA || !okB {
		return 0, false, false
	}
	return compareTemporals(ta, tb, timeA, timeB)
}

// temporalOf returns the temporal of a Date, DateTime or Time, and
// whether it is a Time.
func temporalOf(v Value) (t temporal, isTime, ok bool) {
	switch x := v.(type) {
	case Date:
		return x.temporal, false, true
	case DateTime:
		return x.temporal, false, true
	case Time:
		return x.temporal, true, true
	}
	return temporal{}, false, false
}

// nodeOrValueTemporal is temporalOf that also reads a date, dateTime or
// instant node, as toSystem would convert it but without making a Value.
// empty is true for such a node without a (valid) value.
func nodeOrValueTemporal(v Value) (t temporal, isTime, empty, ok bool) {
	n, isNode := v.(*Node)
	if !isNode {
		t, isTime, ok = temporalOf(v)
		return t, isTime, false, ok
	}
	switch x := n.Value.(type) {
	case *r4.Date:
		if !x.HasValue() {
			return temporal{}, false, true, true
		}
		ok = parseDatePart(x.Value, &t)
	case *r4.DateTime:
		if !x.HasValue() {
			return temporal{}, false, true, true
		}
		var dt DateTime
		dt, ok = parseDateTime(x.Value)
		t = dt.temporal
	case *r4.Instant:
		if !x.HasValue() {
			return temporal{}, false, true, true
		}
		var dt DateTime
		dt, ok = parseDateTime(x.Value)
		t = dt.temporal
	default:
		return temporal{}, false, false, false
	}
	return t, false, !ok, true
}

// compareTemporals is temporalCompare on the temporals.
func compareTemporals(ta, tb temporal, timeA, timeB bool) (c int, known, ok bool) {
	if timeA != timeB {
		return 0, false, false
	}
	if !timeA && ta.Precision >= Hour && tb.Precision >= Hour && ta.HasZone != tb.HasZone {
		// One has a time zone and the other not: the order is unknown.
		return 0, false, true
	}
	if !timeA && ta.Precision >= Hour && tb.Precision >= Hour && (ta.HasZone || tb.HasZone) {
		ta, tb = ta.utc(), tb.utc()
	}
	fa := ta.fields()
	fb := tb.fields()
	start := 0
	if timeA {
		start = 3
	}
	pa, pb := ta.Precision, tb.Precision
	if pa == Millisecond {
		pa = Second
	}
	if pb == Millisecond {
		pb = Second
	}
	minP := min(pa, pb)
	for i := start; i < int(minP); i++ {
		if fa[i] != fb[i] {
			if fa[i] < fb[i] {
				return -1, true, true
			}
			return 1, true, true
		}
	}
	if pa != pb {
		return 0, false, true
	}
	return 0, true, true
}

// fields returns year, month, day, hour, minute and seconds (in
// nanoseconds) for comparison.
func (t temporal) fields() [6]int64 {
	return [6]int64{int64(t.Year), int64(t.Month), int64(t.Day), int64(t.Hour), int64(t.Minute), int64(t.Second)*1e9 + int64(t.Nanosecond)}
}

// utc shifts t to UTC (a time without a zone is taken as UTC).
func (t temporal) utc() temporal {
	if !t.HasZone || t.ZoneOffset == 0 {
		t.HasZone, t.ZoneOffset = true, 0
		return t
	}
	tt := time.Date(t.Year, time.Month(t.Month), t.Day, t.Hour, t.Minute, t.Second, t.Nanosecond, time.UTC).Add(-time.Duration(t.ZoneOffset) * time.Second)
	t.Year, t.Month, t.Day = tt.Year(), int(tt.Month()), tt.Day()
	t.Hour, t.Minute, t.Second, t.Nanosecond = tt.Hour(), tt.Minute(), tt.Second(), tt.Nanosecond()
	t.ZoneOffset = 0
	return t
}

// Quantities.

// calendarSeconds gives the definite duration of calendar keywords and
// UCUM time units.
var timeUnitSeconds = map[string]int64{
	"week": 604800, "day": 86400, "hour": 3600, "minute": 60, "second": 1,
	"wk": 604800, "d": 86400, "h": 3600, "min": 60, "s": 1,
}

// quantityCompare compares two quantities, converting UCUM units;
// known is false when the units cannot be compared.
func quantityCompare(a, b Quantity, equivalence bool) (int, bool) {
	if a.Unit == b.Unit {
		if equivalence {
			p := min(a.Value.scale, b.Value.scale)
			return a.Value.roundTo(p).cmp(b.Value.roundTo(p)), true
		}
		return a.Value.cmp(b.Value), true
	}
	// Calendar keywords equal their UCUM definite units from weeks down;
	// year and month only equal themselves.
	if s1, ok := timeUnitSeconds[a.Unit]; ok {
		if s2, ok := timeUnitSeconds[b.Unit]; ok {
			va := a.Value.mul(decFromInt(s1))
			vb := b.Value.mul(decFromInt(s2))
			return va.cmp(vb), true
		}
	}
	if a.Unit == "millisecond" && b.Unit == "ms" || a.Unit == "ms" && b.Unit == "millisecond" {
		return a.Value.cmp(b.Value), true
	}
	ua, ok1 := parseUCUM(a.Unit)
	ub, ok2 := parseUCUM(b.Unit)
	if !ok1 || !ok2 || ua.dim != ub.dim {
		return 0, false
	}
	va := new(big.Rat).Mul(a.Value.rat(), ua.factor)
	vb := new(big.Rat).Mul(b.Value.rat(), ub.factor)
	if equivalence {
		// Compare at the precision of the less precise operand, in the
		// first operand's unit.
		da := Decimal{r: va, scale: a.Value.scale}
		db := Decimal{r: vb, scale: b.Value.scale}
		p := min(a.Value.scale, b.Value.scale)
		da = Decimal{r: new(big.Rat).Quo(da.r, ua.factor)}
		db = Decimal{r: new(big.Rat).Quo(db.r, ua.factor)}
		return da.roundTo(p).cmp(db.roundTo(p)), true
	}
	return va.Cmp(vb), true
}

// ucumUnit is a simple UCUM unit: a factor to its base unit and the base
// unit's dimension.
type ucumUnit struct {
	factor *big.Rat
	dim    string
}

var ucumBase = map[string]struct {
	factor string
	dim    string
}{
	"g": {"1", "g"}, "m": {"1", "m"}, "l": {"1/1000", "m3"}, "L": {"1/1000", "m3"},
	"s": {"1", "s"}, "min": {"60", "s"}, "h": {"3600", "s"}, "d": {"86400", "s"}, "wk": {"604800", "s"},
	"mo": {"2629800", "s"}, "a": {"31557600", "s"},
	"[in_i]": {"0.0254", "m"}, "[ft_i]": {"0.3048", "m"}, "[lb_av]": {"453.59237", "g"}, "[oz_av]": {"28.349523125", "g"},
	"mol": {"1", "mol"}, "eq": {"1", "eq"}, "Cel": {"", ""}, "K": {"1", "K"}, "%": {"1/100", "1"},
	"ms": {"1/1000", "s"}, "[pi]": {"", ""},
	"[iU]": {"1", "[iU]"}, "U": {"1", "U"}, "mm[Hg]": {"133322/1000", "Pa"}, "Pa": {"1", "Pa"},
}

var ucumPrefixes = map[string]string{
	"k": "1000", "h": "100", "da": "10", "d": "1/10", "c": "1/100", "m": "1/1000", "u": "1/1000000",
	"n": "1/1000000000", "p": "1/1000000000000", "M": "1000000", "G": "1000000000",
}

// parseUCUM understands UCUM terms built from the units in ucumBase, with
// metric prefixes, integer exponents (m2, s-1), products (.), quotients
// (/), bracketed annotations ({score}) and numeric factors. The dimension
// is a canonical string of base units and exponents.
func parseUCUM(u string) (ucumUnit, bool) {
	if u == "" || len(u) > 256 {
		return ucumUnit{}, false
	}
	factor := new(big.Rat).SetInt64(1)
	dims := map[string]int{}
	sign := 1
	i := 0
	for i <= len(u) {
		j := i
		depth := 0
		for j < len(u) && (depth > 0 || u[j] != '.' && u[j] != '/') {
			switch u[j] {
			case '[', '{', '(':
				depth++
			case ']', '}', ')':
				depth--
			}
			j++
		}
		term := u[i:j]
		if !ucumTerm(term, sign, factor, dims) {
			return ucumUnit{}, false
		}
		if j >= len(u) {
			break
		}
		// UCUM operators bind left to right: a/b.c is (a/b).c.
		sign = 1
		if u[j] == '/' {
			sign = -1
		}
		i = j + 1
	}
	keys := make([]string, 0, len(dims))
	for k, v := range dims {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteString(strconv.Itoa(dims[k]))
		b.WriteByte('.')
	}
	return ucumUnit{factor: factor, dim: b.String()}, true
}

// ucumTerm folds one term (such as cm2 or 10*3 or {score}) into factor and
// dims with the exponent sign.
func ucumTerm(term string, sign int, factor *big.Rat, dims map[string]int) bool {
	// Annotations alone are dimensionless.
	for {
		a := strings.IndexByte(term, '{')
		if a < 0 {
			break
		}
		b := strings.IndexByte(term[a:], '}')
		if b < 0 {
			return false
		}
		term = term[:a] + term[a+b+1:]
	}
	if term == "" || term == "1" {
		return true
	}
	if n, ok := atoiN(term); ok {
		if n == 0 || len(term) > 18 {
			return false // a factor of zero is no unit
		}
		f := new(big.Rat).SetInt64(int64(n))
		if sign < 0 {
			f.Inv(f)
		}
		factor.Mul(factor, f)
		return true
	}
	if strings.HasPrefix(term, "10*") || strings.HasPrefix(term, "10^") {
		e, err := strconv.Atoi(term[3:])
		if err != nil || e > 30 || e < -30 {
			return false
		}
		f := new(big.Rat).SetInt(pow10(abs(e)))
		if e*sign < 0 {
			f.Inv(f)
		}
		factor.Mul(factor, f)
		return true
	}
	// Split a trailing integer exponent.
	k := len(term)
	for k > 0 && isDigit(term[k-1]) {
		k--
	}
	if k > 0 && term[k-1] == '-' && k < len(term) {
		k--
	}
	exp := 1
	if k < len(term) && k > 0 {
		e, err := strconv.Atoi(term[k:])
		if err != nil || e > 10 || e < -10 {
			return false
		}
		exp = e
		term = term[:k]
	}
	f, dim, ok := ucumAtom(term)
	if !ok {
		return false
	}
	exp *= sign
	for n := 0; n < abs(exp); n++ {
		if exp > 0 {
			factor.Mul(factor, f)
		} else {
			factor.Quo(factor, f)
		}
	}
	for d, e := range dim {
		dims[d] += e * exp
	}
	return true
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// ucumAtom resolves a unit atom with an optional prefix.
func ucumAtom(a string) (*big.Rat, map[string]int, bool) {
	if b, ok := ucumBase[a]; ok && b.factor != "" {
		f, _ := new(big.Rat).SetString(b.factor)
		return f, dimsOf(b.dim), true
	}
	for p, pf := range ucumPrefixes {
		if strings.HasPrefix(a, p) {
			if b, ok := ucumBase[a[len(p):]]; ok && b.factor != "" && !strings.HasPrefix(a[len(p):], "[") {
				f, _ := new(big.Rat).SetString(b.factor)
				g, _ := new(big.Rat).SetString(pf)
				return f.Mul(f, g), dimsOf(b.dim), true
			}
		}
	}
	return nil, nil, false
}

func dimsOf(d string) map[string]int {
	switch d {
	case "1":
		return nil
	case "m3":
		return map[string]int{"m": 3}
	}
	return map[string]int{d: 1}
}
