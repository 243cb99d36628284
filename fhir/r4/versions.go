package r4

// earlierVersionShape maps element paths (inside a resource, without
// indices) that DSTU2 or STU3 JSON uses and R4 does not, or uses with another
// JSON type, to a short explanation. A decode error at one of these paths
// also matches ErrNotR4. The list covers the shapes of the resources that
// patient-access APIs return most (Synthea, US Core, Blue Button), where an
// old server's output is likely to show up; any unknown resourceType is
// reported as ErrNotR4 in any case.
func earlierVersionShape(path string) (string, bool) {
	switch path {
	case "Patient.animal":
		return "Patient.animal was removed in R4", true
	case "Patient.careProvider":
		return "DSTU2 Patient.careProvider is R4 generalPractitioner", true
	case "Condition.patient":
		return "DSTU2 Condition.patient is R4 subject", true
	case "Condition.context":
		return "STU3 Condition.context is R4 encounter", true
	case "Condition.clinicalStatus":
		return "STU3 clinicalStatus is a code; R4 makes it a CodeableConcept", true
	case "Condition.verificationStatus":
		return "STU3 verificationStatus is a code; R4 makes it a CodeableConcept", true
	case "Condition.dateRecorded":
		return "DSTU2 Condition.dateRecorded is R4 recordedDate", true
	case "Condition.assertedDate":
		return "STU3 Condition.assertedDate was removed in R4", true
	case "AllergyIntolerance.clinicalStatus":
		return "STU3 clinicalStatus is a code; R4 makes it a CodeableConcept", true
	case "AllergyIntolerance.verificationStatus":
		return "STU3 verificationStatus is a code; R4 makes it a CodeableConcept", true
	case "AllergyIntolerance.assertedDate":
		return "STU3 AllergyIntolerance.assertedDate is R4 recordedDate", true
	case "AllergyIntolerance.substance":
		return "DSTU2 AllergyIntolerance.substance is R4 code", true
	case "AllergyIntolerance.status":
		return "DSTU2 AllergyIntolerance.status was split in R4", true
	case "Encounter.patient":
		return "DSTU2 Encounter.patient is R4 subject", true
	case "Encounter.class":
		return "DSTU2 Encounter.class is a code; R4 makes it a Coding", true
	case "Encounter.incomingReferral":
		return "STU3 Encounter.incomingReferral is R4 basedOn", true
	case "Encounter.indication":
		return "DSTU2 Encounter.indication is R4 reasonReference", true
	case "Encounter.reason":
		return "STU3 Encounter.reason is R4 reasonCode", true
	case "MedicationRequest.context":
		return "STU3 MedicationRequest.context is R4 encounter", true
	case "MedicationRequest.definition":
		return "STU3 MedicationRequest.definition was removed in R4", true
	case "MedicationStatement.taken":
		return "STU3 MedicationStatement.taken was removed in R4", true
	case "MedicationStatement.notTaken":
		return "STU3 MedicationStatement.notTaken was removed in R4", true
	case "Medication.isBrand":
		return "STU3 Medication.isBrand was removed in R4", true
	case "Medication.isOverTheCounter":
		return "STU3 Medication.isOverTheCounter was removed in R4", true
	case "Medication.package":
		return "STU3 Medication.package was removed in R4", true
	case "Observation.context":
		return "STU3 Observation.context is R4 encounter", true
	case "Observation.comment":
		return "STU3 Observation.comment is R4 note", true
	case "Observation.comments":
		return "DSTU2 Observation.comments is R4 note", true
	case "Observation.related":
		return "STU3 Observation.related is R4 hasMember/derivedFrom", true
	case "Procedure.context":
		return "STU3 Procedure.context is R4 encounter", true
	case "Procedure.notPerformed":
		return "STU3 Procedure.notPerformed was removed in R4", true
	case "Procedure.definition":
		return "STU3 Procedure.definition is R4 instantiatesCanonical", true
	case "DiagnosticReport.context":
		return "STU3 DiagnosticReport.context is R4 encounter", true
	case "DiagnosticReport.request":
		return "DSTU2 DiagnosticReport.request is R4 basedOn", true
	case "DiagnosticReport.codedDiagnosis":
		return "STU3 DiagnosticReport.codedDiagnosis is R4 conclusionCode", true
	case "Immunization.date":
		return "STU3 Immunization.date is R4 occurrenceDateTime", true
	case "Immunization.notGiven":
		return "STU3 Immunization.notGiven is R4 status not-done", true
	case "Immunization.wasNotGiven":
		return "DSTU2 Immunization.wasNotGiven is R4 status not-done", true
	case "Immunization.reported":
		return "DSTU2 Immunization.reported is R4 primarySource", true
	case "Immunization.practitioner":
		return "STU3 Immunization.practitioner is R4 performer", true
	case "Immunization.explanation":
		return "STU3 Immunization.explanation is R4 reasonCode/statusReason", true
	case "Immunization.vaccinationProtocol":
		return "STU3 Immunization.vaccinationProtocol is R4 protocolApplied", true
	case "CarePlan.context":
		return "STU3 CarePlan.context is R4 encounter", true
	case "CarePlan.definition":
		return "STU3 CarePlan.definition is R4 instantiatesCanonical", true
	case "Claim.organization":
		return "STU3 Claim.organization was removed in R4", true
	case "Claim.information":
		return "STU3 Claim.information is R4 supportingInfo", true
	case "Claim.employmentImpacted":
		return "STU3 Claim.employmentImpacted was removed in R4", true
	case "Claim.hospitalization":
		return "STU3 Claim.hospitalization was removed in R4", true
	case "ExplanationOfBenefit.organization":
		return "STU3 ExplanationOfBenefit.organization was removed in R4", true
	case "ExplanationOfBenefit.information":
		return "STU3 ExplanationOfBenefit.information is R4 supportingInfo", true
	case "ExplanationOfBenefit.totalCost":
		return "STU3 ExplanationOfBenefit.totalCost is R4 total", true
	case "Goal.status":
		return "STU3 Goal.status is R4 lifecycleStatus", true
	case "DocumentReference.indexed":
		return "STU3 DocumentReference.indexed is R4 date", true
	case "DocumentReference.created":
		return "STU3 DocumentReference.created was removed in R4", true
	case "DocumentReference.class":
		return "STU3 DocumentReference.class is R4 category", true
	case "Practitioner.practitionerRole":
		return "DSTU2 Practitioner.practitionerRole is the R4 PractitionerRole resource", true
	case "CapabilityStatement.acceptUnknown":
		return "STU3 CapabilityStatement.acceptUnknown was removed in R4", true
	case "Device.udi":
		return "STU3 Device.udi is R4 udiCarrier", true
	case "Device.model":
		return "STU3 Device.model is R4 modelNumber", true
	case "CareTeam.context":
		return "STU3 CareTeam.context is R4 encounter", true
	case "Observation.valueAttachment":
		return "STU3 Observation.valueAttachment was removed in R4", true
	case "Procedure.notDone":
		return "STU3 Procedure.notDone is R4 status not-done", true
	case "Composition.class":
		return "STU3 Composition.class is R4 category", true
	case "MedicationStatement.wasNotTaken":
		return "DSTU2 MedicationStatement.wasNotTaken is R4 status not-taken", true
	case "Bundle.fhirVersion":
		return "Bundle.fhirVersion is not an R4 property", true
	}
	return "", false
}
