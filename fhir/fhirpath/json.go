package fhirpath

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/acds-project/acds/fhir/r4"
)

// MarshalJSON encodes a result collection as a JSON array, as
// `acds fhir path` prints it: Booleans, Integers and Decimals as JSON
// booleans and numbers (a Decimal as written, "1.50"), Strings, Dates,
// DateTimes and Times as JSON strings in FHIR form, a Quantity as FHIR
// Quantity JSON ({"value":…,"unit":…,"system":"http://unitsofmeasure.org","code":…}),
// FHIR primitives as their JSON value, and complex elements and resources
// as their FHIR JSON.
func MarshalJSON(c Collection) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, v := range c {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := appendJSON(&b, v); err != nil {
			return nil, err
		}
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

func appendJSON(b *bytes.Buffer, v Value) error {
	switch x := v.(type) {
	case Boolean:
		b.WriteString(strconv.FormatBool(bool(x)))
	case Integer:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case Decimal:
		b.WriteString(x.String())
	case String:
		writeJSONString(b, string(x))
	case Date:
		writeJSONString(b, x.String())
	case DateTime:
		writeJSONString(b, x.String())
	case Time:
		writeJSONString(b, x.String())
	case TypeInfo:
		b.WriteString(`{"namespace":`)
		writeJSONString(b, x.Namespace)
		b.WriteString(`,"name":`)
		writeJSONString(b, x.Name)
		b.WriteByte('}')
	case Quantity:
		b.WriteString(`{"value":`)
		b.WriteString(x.Value.String())
		if u, ok := calendarUCUM[x.Unit]; ok {
			b.WriteString(`,"unit":`)
			writeJSONString(b, x.Unit)
			b.WriteString(`,"system":"http://unitsofmeasure.org","code":`)
			writeJSONString(b, u)
		} else {
			b.WriteString(`,"unit":`)
			writeJSONString(b, x.Unit)
			b.WriteString(`,"system":"http://unitsofmeasure.org","code":`)
			writeJSONString(b, x.Unit)
		}
		b.WriteByte('}')
	case *Node:
		if p, ok := x.Value.(r4.Primitive); ok {
			if !p.HasValue() {
				b.WriteString("null")
				return nil
			}
			switch p.PrimitiveType() {
			case "boolean", "integer", "positiveInt", "unsignedInt", "decimal":
				b.WriteString(p.Text())
			default:
				writeJSONString(b, p.Text())
			}
			return nil
		}
		if r, ok := x.Value.(r4.Resource); ok {
			data, err := r4.Marshal(r)
			if err != nil {
				return err
			}
			b.Write(data)
			return nil
		}
		m, ok := x.Value.(json.Marshaler)
		if !ok {
			return evalErr(ErrNotSupported, -1, "cannot encode %s as JSON", x.Type)
		}
		data, err := m.MarshalJSON()
		if err != nil {
			return err
		}
		b.Write(data)
	default:
		return evalErr(ErrNotSupported, -1, "cannot encode %T as JSON", v)
	}
	return nil
}

// calendarUCUM maps calendar duration keywords to UCUM codes.
var calendarUCUM = map[string]string{
	"year": "a", "month": "mo", "week": "wk", "day": "d", "hour": "h",
	"minute": "min", "second": "s", "millisecond": "ms",
}

func writeJSONString(b *bytes.Buffer, s string) {
	data, _ := json.Marshal(s)
	b.Write(data)
}
