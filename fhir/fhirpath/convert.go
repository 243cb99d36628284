package fhirpath

import (
	"math/big"
	"regexp"
	"strings"
)

var (
	intRe      = regexp.MustCompile(`^[+-]?[0-9]+$`)
	decRe      = regexp.MustCompile(`^[+-]?[0-9]+(\.[0-9]+)?$`)
	quantityRe = regexp.MustCompile(`^([+-]?[0-9]+(?:\.[0-9]+)?)\s*(?:'([^']*)'|([a-z]+))?$`)
)

// convFunc builds a toX and convertsToX pair from a conversion.
func convPair(m map[string]*funcDef, name string, conv func(v Value) (Value, bool)) {
	m["to"+name] = &funcDef{0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
		v, ok, err := singleton(t, n.at)
		if err != nil || !ok {
			return nil, err
		}
		r, ok := conv(v)
		if !ok {
			return nil, nil
		}
		return Collection{r}, nil
	}}
	m["convertsTo"+name] = &funcDef{0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
		v, ok, err := singleton(t, n.at)
		if err != nil || !ok {
			return nil, err
		}
		_, ok = conv(v)
		return boolColl(ok), nil
	}}
}

func conversionFuncs() map[string]*funcDef {
	m := map[string]*funcDef{}
	convPair(m, "Boolean", convBoolean)
	convPair(m, "Integer", convInteger)
	convPair(m, "Decimal", convDecimal)
	convPair(m, "String", convString)
	convPair(m, "Date", convDate)
	convPair(m, "DateTime", convDateTime)
	convPair(m, "Time", convTime)
	quantity := func(e *evaluator, n *callNode, t Collection, sc *scope) (Value, bool, error) {
		v, ok, err := singleton(t, n.at)
		if err != nil || !ok {
			return nil, ok, err
		}
		q, ok := convQuantity(v)
		if !ok {
			return nil, true, nil
		}
		if len(n.args) == 1 {
			unit, ok, err := e.argString(n, 0, sc)
			if err != nil || !ok {
				return nil, true, err
			}
			qq := q.(Quantity)
			if qq.Unit != unit {
				c, err := convertQuantity(qq, unit)
				if err != nil {
					return nil, true, nil
				}
				return c, true, nil
			}
		}
		return q, true, nil
	}
	m["toQuantity"] = &funcDef{0, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
		q, _, err := quantity(e, n, t, sc)
		if err != nil || q == nil {
			return nil, err
		}
		return Collection{q}, nil
	}}
	m["convertsToQuantity"] = &funcDef{0, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
		q, ok, err := quantity(e, n, t, sc)
		if err != nil || !ok {
			return nil, err
		}
		return boolColl(q != nil), nil
	}}
	return m
}

func convBoolean(v Value) (Value, bool) {
	switch x := v.(type) {
	case Boolean:
		return x, true
	case Integer:
		switch x {
		case 0:
			return Boolean(false), true
		case 1:
			return Boolean(true), true
		}
	case Decimal:
		switch {
		case x.cmp(decFromInt(0)) == 0:
			return Boolean(false), true
		case x.cmp(decFromInt(1)) == 0:
			return Boolean(true), true
		}
	case String:
		switch strings.ToLower(string(x)) {
		case "true", "t", "yes", "y", "1", "1.0":
			return Boolean(true), true
		case "false", "f", "no", "n", "0", "0.0":
			return Boolean(false), true
		}
	}
	return nil, false
}

func convInteger(v Value) (Value, bool) {
	switch x := v.(type) {
	case Integer:
		return x, true
	case Boolean:
		if x {
			return Integer(1), true
		}
		return Integer(0), true
	case String:
		if intRe.MatchString(string(x)) {
			n, ok := parseInteger(strings.TrimPrefix(string(x), "+"))
			if ok {
				return n, true
			}
		}
	}
	return nil, false
}

func convDecimal(v Value) (Value, bool) {
	switch x := v.(type) {
	case Decimal:
		return x, true
	case Integer:
		return decFromInt(int64(x)), true
	case Boolean:
		if x {
			return Decimal{r: decFromInt(1).rat(), scale: 1}, true
		}
		return Decimal{r: decFromInt(0).rat(), scale: 1}, true
	case String:
		if decRe.MatchString(string(x)) {
			d, ok := parseDecimal(strings.TrimPrefix(string(x), "+"))
			if ok {
				return d, true
			}
		}
	}
	return nil, false
}

func convString(v Value) (Value, bool) {
	switch x := v.(type) {
	case String:
		return x, true
	case Boolean:
		if x {
			return String("true"), true
		}
		return String("false"), true
	case Integer:
		return String(itoa(int(x))), true
	case Decimal:
		return String(x.String()), true
	case Quantity:
		return String(x.String()), true
	case Date:
		return String(x.String()), true
	case DateTime:
		return String(x.String()), true
	case Time:
		return String(x.String()), true
	}
	return nil, false
}

// String writes the quantity as FHIRPath does: 1 'wk', 3 days.
func (q Quantity) String() string {
	if _, ok := calendarUnits[q.Unit]; ok {
		u := q.Unit
		if q.Value.cmp(decFromInt(1)) != 0 {
			u += "s"
		}
		return q.Value.String() + " " + u
	}
	return q.Value.String() + " '" + q.Unit + "'"
}

func convDate(v Value) (Value, bool) {
	switch x := v.(type) {
	case Date:
		return x, true
	case DateTime:
		t := x.temporal
		t.Precision = min(t.Precision, Day)
		t.Hour, t.Minute, t.Second, t.Nanosecond, t.HasZone, t.ZoneOffset = 0, 0, 0, 0, false, 0
		return Date{t}, true
	case String:
		if d, ok := parseDate(string(x)); ok {
			return d, true
		}
		if dt, ok := parseDateTime(string(x)); ok {
			return convDate(dt)
		}
	}
	return nil, false
}

func convDateTime(v Value) (Value, bool) {
	switch x := v.(type) {
	case DateTime:
		return x, true
	case Date:
		return DateTime{x.temporal}, true
	case String:
		if dt, ok := parseDateTime(string(x)); ok {
			return dt, true
		}
	}
	return nil, false
}

func convTime(v Value) (Value, bool) {
	switch x := v.(type) {
	case Time:
		return x, true
	case String:
		if t, ok := parseTime(string(x)); ok {
			return t, true
		}
	}
	return nil, false
}

func convQuantity(v Value) (Value, bool) {
	switch x := v.(type) {
	case Quantity:
		return x, true
	case Integer, Decimal:
		return Quantity{Value: toDecimal(x), Unit: "1"}, true
	case Boolean:
		d := decFromInt(0)
		if x {
			d = decFromInt(1)
		}
		d.scale = 1
		return Quantity{Value: d, Unit: "1"}, true
	case String:
		m := quantityRe.FindStringSubmatch(strings.TrimSpace(string(x)))
		if m == nil {
			return nil, false
		}
		d, ok := parseDecimal(strings.TrimPrefix(m[1], "+"))
		if !ok {
			return nil, false
		}
		unit := "1"
		switch {
		case m[2] != "":
			unit = m[2]
		case m[3] != "":
			u, ok := calendarUnits[m[3]]
			if !ok {
				return nil, false
			}
			unit = u
		}
		return Quantity{Value: d, Unit: unit}, true
	}
	return nil, false
}

// convertQuantity converts q to unit (UCUM).
func convertQuantity(q Quantity, unit string) (Quantity, error) {
	target := Quantity{Value: decFromInt(1), Unit: unit}
	from, ok1 := unitFactor(q.Unit)
	to, ok2 := unitFactor(unit)
	if !ok1 || !ok2 || from.dim != to.dim {
		return Quantity{}, evalErr(ErrNotSupported, -1, "cannot convert %s to %s", q.Unit, unit)
	}
	v := new(big.Rat).Mul(q.Value.rat(), from.factor)
	v.Quo(v, to.factor)
	target.Value = Decimal{r: v, scale: q.Value.scale}
	return target, nil
}

// unitFactor is parseUCUM extended with calendar keywords of definite
// length.
func unitFactor(u string) (ucumUnit, bool) {
	switch u {
	case "week", "day", "hour", "minute", "second":
		u = map[string]string{"week": "wk", "day": "d", "hour": "h", "minute": "min", "second": "s"}[u]
	case "millisecond":
		u = "ms"
	}
	return parseUCUM(u)
}
