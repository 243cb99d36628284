package r4

// elementer is implemented by every primitive, data type and backbone
// element: the generated elementParts returns pointers to its ID and
// Extension fields (nil, nil for a nil receiver).
type elementer interface {
	elementParts() (*string, *[]Extension)
}

// ElementOf gives generic access to what every FHIR element carries besides
// its value or children: its element id and its extensions. x is what Walk
// passes for an element, a pointer to a primitive (*String, *Date…), a data
// type (*HumanName, *Extension…) or a backbone element (*PatientContact…).
// It returns pointers to x's ID and Extension fields, through which a caller
// can read, replace or clear them in place. For anything else (a resource, a
// nil pointer, a value of another package) both are nil.
func ElementOf(x any) (id *string, ext *[]Extension) {
	if e, ok := x.(elementer); ok {
		return e.elementParts()
	}
	return nil, nil
}
