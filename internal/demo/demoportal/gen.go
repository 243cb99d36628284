package demoportal

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"
)

// Code systems used by the synthetic records.
const (
	systemSNOMED   = "http://snomed.info/sct"
	systemLOINC    = "http://loinc.org"
	systemRxNorm   = "http://www.nlm.nih.gov/research/umls/rxnorm"
	systemCVX      = "http://hl7.org/fhir/sid/cvx"
	systemUCUM     = "http://unitsofmeasure.org"
	systemNPI      = "http://hl7.org/fhir/sid/us-npi"
	systemActCode  = "http://terminology.hl7.org/CodeSystem/v3-ActCode"
	systemObsCat   = "http://terminology.hl7.org/CodeSystem/observation-category"
	systemCondCat  = "http://terminology.hl7.org/CodeSystem/condition-category"
	systemCondClin = "http://terminology.hl7.org/CodeSystem/condition-clinical"
	systemCondVer  = "http://terminology.hl7.org/CodeSystem/condition-ver-status"
	systemAllClin  = "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical"
	systemAllVer   = "http://terminology.hl7.org/CodeSystem/allergyintolerance-verification"
	systemMRN      = "urn:acds:demo-portal:mrn"
)

type code struct{ system, code, display string }

var (
	conditions = []code{
		{systemSNOMED, "44054006", "Diabetes mellitus type 2"},
		{systemSNOMED, "38341003", "Hypertensive disorder, systemic arterial"},
		{systemSNOMED, "195967001", "Asthma"},
		{systemSNOMED, "55822004", "Hyperlipidemia"},
		{systemSNOMED, "10509002", "Acute bronchitis"},
		{systemSNOMED, "444814009", "Viral sinusitis"},
		{systemSNOMED, "35489007", "Depressive disorder"},
		{systemSNOMED, "239873007", "Osteoarthritis of knee"},
	}
	medications = []code{
		{systemRxNorm, "860975", "24 HR metformin hydrochloride 500 MG Extended Release Oral Tablet"},
		{systemRxNorm, "314076", "lisinopril 10 MG Oral Tablet"},
		{systemRxNorm, "197361", "amlodipine 5 MG Oral Tablet"},
		{systemRxNorm, "259255", "atorvastatin 80 MG Oral Tablet"},
		{systemRxNorm, "308182", "amoxicillin 250 MG Oral Capsule"},
		{systemRxNorm, "745679", "200 ACTUAT albuterol 0.09 MG/ACTUAT Metered Dose Inhaler"},
		{systemRxNorm, "310965", "ibuprofen 200 MG Oral Tablet"},
	}
	vaccines = []code{
		{systemCVX, "140", "Influenza, seasonal, injectable, preservative free"},
		{systemCVX, "115", "Tdap"},
		{systemCVX, "133", "Pneumococcal conjugate PCV 13"},
		{systemCVX, "208", "SARS-COV-2 (COVID-19) vaccine, mRNA, spike protein, LNP, preservative free, 30 mcg/0.3mL dose"},
		{systemCVX, "08", "Hep B, adolescent or pediatric"},
		{systemCVX, "62", "HPV, quadrivalent"},
	}
	allergies = []struct {
		c        code
		category string
	}{
		{code{systemSNOMED, "91936005", "Allergy to penicillin"}, "medication"},
		{code{systemSNOMED, "91935009", "Allergy to peanuts"}, "food"},
		{code{systemSNOMED, "300916003", "Latex allergy"}, "environment"},
		{code{systemSNOMED, "232347008", "Dander (animal) allergy"}, "environment"},
	}
	procedures = []code{
		{systemSNOMED, "73761001", "Colonoscopy"},
		{systemSNOMED, "399208008", "Plain chest X-ray"},
		{systemSNOMED, "430193006", "Medication reconciliation"},
		{systemSNOMED, "80146002", "Appendectomy"},
		{systemSNOMED, "252160004", "Standard pregnancy test"},
	}
	// vitals: LOINC code, display, UCUM unit, low, high, decimals.
	vitals = []struct {
		c         code
		unit      string
		low, high float64
		decimals  int
	}{
		{code{systemLOINC, "8867-4", "Heart rate"}, "/min", 52, 110, 0},
		{code{systemLOINC, "9279-1", "Respiratory rate"}, "/min", 11, 22, 0},
		{code{systemLOINC, "8310-5", "Body temperature"}, "Cel", 36.1, 38.4, 1},
		{code{systemLOINC, "29463-7", "Body weight"}, "kg", 48, 120, 1},
		{code{systemLOINC, "8302-2", "Body height"}, "cm", 150, 195, 1},
		{code{systemLOINC, "2708-6", "Oxygen saturation in Arterial blood"}, "%", 92, 100, 0},
	}
	labs = []struct {
		c         code
		unit      string
		low, high float64
		decimals  int
	}{
		{code{systemLOINC, "4548-4", "Hemoglobin A1c/Hemoglobin.total in Blood"}, "%", 4.6, 9.8, 1},
		{code{systemLOINC, "2345-7", "Glucose [Mass/volume] in Serum or Plasma"}, "mg/dL", 70, 210, 0},
		{code{systemLOINC, "2093-3", "Cholesterol [Mass/volume] in Serum or Plasma"}, "mg/dL", 130, 290, 0},
		{code{systemLOINC, "2160-0", "Creatinine [Mass/volume] in Serum or Plasma"}, "mg/dL", 0.6, 1.6, 2},
		{code{systemLOINC, "718-7", "Hemoglobin [Mass/volume] in Blood"}, "g/dL", 11, 17.5, 1},
	}
	givenNames  = []string{"Ada", "Bea", "Carlos", "Dmitri", "Elif", "Farah", "Goran", "Hana", "Ines", "Jonas", "Kofi", "Lena", "Mateo", "Nia", "Omar", "Priya"}
	familyNames = []string{"Lovelace", "Okafor", "Svensson", "Tanaka", "Moreau", "Haddad", "Kowalski", "Nguyen", "Rossi", "Mensah", "Fischer", "Silva"}
	cities      = []struct{ city, state, zip string }{{"Springfield", "IL", "62701"}, {"Madison", "WI", "53703"}, {"Salem", "OR", "97301"}, {"Dover", "DE", "19901"}}
)

// encounterPlan gives the number of encounters by patient index, so that
// record sizes range from a few KB to several MB. Index 3 (and every
// sixth after it) is about 1 MB.
var encounterPlan = []int{1, 8, 40, 140, 900, 15}

// genEpoch is the fixed "now" of the synthetic histories, so the records
// are the same whenever they are generated.
var genEpoch = time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)

// resource is one generated resource, serialised.
type resource struct {
	Type string
	ID   string
	JSON json.RawMessage
	// Compartment is true for resources in the patient's compartment
	// (searchable by patient), false for referenced shared resources.
	Compartment bool
	// PatientField is the element that refers to the patient ("subject"
	// or "patient"); empty for the Patient and shared resources.
	PatientField string
}

// record is one synthetic patient's data.
type record struct {
	ID        string
	Name      string
	Resources []resource // the Patient first
	Bytes     int        // sum of the resources' JSON sizes
}

// PatientID returns the id of the i-th demo patient (0-based).
func PatientID(i int) string { return fmt.Sprintf("pat-%04d", i+1) }

type gen struct {
	r      *rand.Rand
	pid    string
	n      int
	out    []resource
	bytes  int
	seq    int
	practs []string
	org    string
	meds   map[string]string // rxnorm code → Medication id
}

func (g *gen) id(prefix string) string {
	g.seq++
	return fmt.Sprintf("%s-%04d-%05d", prefix, g.n+1, g.seq)
}

func (g *gen) add(typ, id string, compartment bool, m map[string]any) {
	m["resourceType"] = typ
	m["id"] = id
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("portal: generated resource does not marshal: %v", err)) // maps of plain values always marshal
	}
	field := ""
	for _, f := range []string{"patient", "subject"} {
		if r, ok := m[f].(map[string]any); ok && r["reference"] == "Patient/"+g.pid {
			field = f
		}
	}
	g.out = append(g.out, resource{Type: typ, ID: id, JSON: b, Compartment: compartment, PatientField: field})
	g.bytes += len(b)
}

func cc(c code) map[string]any {
	return map[string]any{"coding": []any{map[string]any{"system": c.system, "code": c.code, "display": c.display}}, "text": c.display}
}

func coding(system, c string) map[string]any {
	return map[string]any{"coding": []any{map[string]any{"system": system, "code": c}}}
}

func ref(typ, id string) map[string]any { return map[string]any{"reference": typ + "/" + id} }

func (g *gen) pick(n int) int { return g.r.IntN(n) }

func (g *gen) value(low, high float64, decimals int) float64 {
	v := low + g.r.Float64()*(high-low)
	p := 1.0
	for range decimals {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}

func dt(t time.Time) string { return t.Format(time.RFC3339) }

// generate builds patient i of the demo population for seed.
func generate(seed uint64, i int) *record {
	g := &gen{r: rand.New(rand.NewPCG(seed, uint64(i)+0x9e3779b97f4a7c15)), pid: PatientID(i), n: i, meds: map[string]string{}}
	given := givenNames[g.pick(len(givenNames))]
	family := familyNames[g.pick(len(familyNames))]
	gender := []string{"female", "male", "other"}[g.pick(3)]
	birth := genEpoch.AddDate(-(18 + g.pick(70)), -g.pick(12), -g.pick(28))
	city := cities[g.pick(len(cities))]
	g.add("Patient", g.pid, true, map[string]any{
		"meta":       map[string]any{"lastUpdated": dt(genEpoch)},
		"identifier": []any{map[string]any{"system": systemMRN, "value": fmt.Sprintf("MRN%07d", 1000+i)}},
		"active":     true,
		"name":       []any{map[string]any{"use": "official", "family": family, "given": []any{given}}},
		"telecom":    []any{map[string]any{"system": "phone", "value": fmt.Sprintf("555-01%02d", i%100), "use": "home"}},
		"gender":     gender,
		"birthDate":  birth.Format("2006-01-02"),
		"address": []any{map[string]any{"use": "home", "line": []any{fmt.Sprintf("%d Demo Street", 10+g.pick(900))},
			"city": city.city, "state": city.state, "postalCode": city.zip, "country": "US"}},
	})
	// Shared resources the compartment refers to.
	g.org = fmt.Sprintf("org-%04d", i+1)
	g.add("Organization", g.org, false, map[string]any{"active": true, "name": city.city + " Community Clinic"})
	for k := range 2 {
		pr := fmt.Sprintf("pract-%04d-%d", i+1, k+1)
		g.practs = append(g.practs, pr)
		g.add("Practitioner", pr, false, map[string]any{
			"identifier": []any{map[string]any{"system": systemNPI, "value": fmt.Sprintf("19%08d", i*10+k)}},
			"name":       []any{map[string]any{"family": familyNames[g.pick(len(familyNames))], "given": []any{givenNames[g.pick(len(givenNames))]}, "prefix": []any{"Dr."}}},
		})
	}
	// Allergies and a chronic condition or two, from the start.
	for range 1 + g.pick(2) {
		a := allergies[g.pick(len(allergies))]
		g.add("AllergyIntolerance", g.id("alg"), true, map[string]any{
			"clinicalStatus":     coding(systemAllClin, "active"),
			"verificationStatus": coding(systemAllVer, "confirmed"),
			"type":               "allergy",
			"category":           []any{a.category},
			"criticality":        []string{"low", "high"}[g.pick(2)],
			"code":               cc(a.c),
			"patient":            ref("Patient", g.pid),
			"recordedDate":       dt(birth.AddDate(10, 0, 0)),
		})
	}
	encounters := encounterPlan[i%len(encounterPlan)]
	start := genEpoch.AddDate(0, 0, -7*encounters-30)
	t := start
	for e := range encounters {
		t = t.Add(time.Duration(5+g.pick(4)) * 24 * time.Hour).Add(time.Duration(g.pick(480)) * time.Minute)
		g.encounter(t, e)
	}
	rec := &record{ID: g.pid, Name: given + " " + family, Resources: g.out, Bytes: g.bytes}
	return rec
}

func (g *gen) encounter(t time.Time, e int) {
	enc := g.id("enc")
	pract := g.practs[g.pick(len(g.practs))]
	g.add("Encounter", enc, true, map[string]any{
		"status":          "finished",
		"class":           map[string]any{"system": systemActCode, "code": "AMB", "display": "ambulatory"},
		"type":            []any{cc(code{systemSNOMED, "185349003", "Encounter for check up"})},
		"subject":         ref("Patient", g.pid),
		"participant":     []any{map[string]any{"individual": ref("Practitioner", pract)}},
		"period":          map[string]any{"start": dt(t), "end": dt(t.Add(30 * time.Minute))},
		"serviceProvider": ref("Organization", g.org),
	})
	obs := func(c code, category string, val float64, unit string, at time.Time) {
		g.add("Observation", g.id("obs"), true, map[string]any{
			"status":            "final",
			"category":          []any{coding(systemObsCat, category)},
			"code":              cc(c),
			"subject":           ref("Patient", g.pid),
			"encounter":         ref("Encounter", enc),
			"effectiveDateTime": dt(at),
			"issued":            dt(at.Add(time.Hour)),
			"valueQuantity":     map[string]any{"value": val, "unit": unit, "system": systemUCUM, "code": unit},
		})
	}
	for _, v := range vitals {
		obs(v.c, "vital-signs", g.value(v.low, v.high, v.decimals), v.unit, t.Add(5*time.Minute))
	}
	g.add("Observation", g.id("obs"), true, map[string]any{
		"status":            "final",
		"category":          []any{coding(systemObsCat, "vital-signs")},
		"code":              cc(code{systemLOINC, "85354-9", "Blood pressure panel with all children optional"}),
		"subject":           ref("Patient", g.pid),
		"encounter":         ref("Encounter", enc),
		"effectiveDateTime": dt(t.Add(5 * time.Minute)),
		"component": []any{
			map[string]any{"code": cc(code{systemLOINC, "8480-6", "Systolic blood pressure"}),
				"valueQuantity": map[string]any{"value": g.value(100, 160, 0), "unit": "mm[Hg]", "system": systemUCUM, "code": "mm[Hg]"}},
			map[string]any{"code": cc(code{systemLOINC, "8462-4", "Diastolic blood pressure"}),
				"valueQuantity": map[string]any{"value": g.value(60, 100, 0), "unit": "mm[Hg]", "system": systemUCUM, "code": "mm[Hg]"}},
		},
	})
	if e%3 == 0 {
		for _, l := range labs {
			obs(l.c, "laboratory", g.value(l.low, l.high, l.decimals), l.unit, t.Add(20*time.Minute))
		}
	}
	if e%4 == 0 {
		c := conditions[g.pick(len(conditions))]
		g.add("Condition", g.id("cond"), true, map[string]any{
			"clinicalStatus":     coding(systemCondClin, "active"),
			"verificationStatus": coding(systemCondVer, "confirmed"),
			"category":           []any{coding(systemCondCat, "encounter-diagnosis")},
			"code":               cc(c),
			"subject":            ref("Patient", g.pid),
			"encounter":          ref("Encounter", enc),
			"onsetDateTime":      dt(t),
			"recordedDate":       dt(t),
		})
	}
	if e%3 == 1 || e == 0 {
		m := medications[g.pick(len(medications))]
		mr := map[string]any{
			"status":            []string{"active", "completed"}[g.pick(2)],
			"intent":            "order",
			"subject":           ref("Patient", g.pid),
			"encounter":         ref("Encounter", enc),
			"authoredOn":        dt(t.Add(25 * time.Minute)),
			"requester":         ref("Practitioner", pract),
			"dosageInstruction": []any{map[string]any{"text": "Take as directed", "sequence": 1}},
		}
		if g.pick(2) == 0 {
			mr["medicationCodeableConcept"] = cc(m)
		} else {
			id, ok := g.meds[m.code]
			if !ok {
				id = g.id("med")
				g.meds[m.code] = id
				g.add("Medication", id, false, map[string]any{"code": cc(m), "status": "active"})
			}
			mr["medicationReference"] = ref("Medication", id)
		}
		g.add("MedicationRequest", g.id("medrx"), true, mr)
	}
	if e%10 == 2 || e == 0 {
		v := vaccines[g.pick(len(vaccines))]
		g.add("Immunization", g.id("imm"), true, map[string]any{
			"status":             "completed",
			"vaccineCode":        cc(v),
			"patient":            ref("Patient", g.pid),
			"encounter":          ref("Encounter", enc),
			"occurrenceDateTime": dt(t.Add(15 * time.Minute)),
			"primarySource":      true,
			"lotNumber":          fmt.Sprintf("LOT%05d", g.pick(100000)),
		})
	}
	if e%7 == 5 || e == 0 {
		p := procedures[g.pick(len(procedures))]
		g.add("Procedure", g.id("proc"), true, map[string]any{
			"status":            "completed",
			"code":              cc(p),
			"subject":           ref("Patient", g.pid),
			"encounter":         ref("Encounter", enc),
			"performedDateTime": dt(t.Add(10 * time.Minute)),
			"performer":         []any{map[string]any{"actor": ref("Practitioner", pract)}},
		})
	}
}
