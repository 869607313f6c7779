package detect

// Kind is what a [Span] holds.
type Kind uint8

// The kinds a Scanner reports. Their order is the order of their bits in a
// [Set] and must not change: the pii plugin's state records kinds by
// number.
const (
	Email  Kind = iota + 1 // an e-mail address
	Phone                  // a phone number, international (+…) or in a common national format
	Card                   // a payment card number (Luhn, known issuer ranges)
	IBAN                   // an international bank account number (length per country, mod 97)
	USSSN                  // a US social security number, AAA-GG-SSSS
	UKNINO                 // a UK national insurance number
	ESDNI                  // a Spanish DNI or NIE, with its check letter
	ITCF                   // an Italian codice fiscale, with its check letter
	BRCPF                  // a Brazilian CPF, 000.000.000-00, with its check digits
	IPv4                   // an IPv4 address
	IPv6                   // an IPv6 address
	Secret                 // a credential with a well-known prefix, a JWT or a PEM private key
	numKinds
)

var kindNames = [numKinds]string{
	Email: "email", Phone: "phone", Card: "card", IBAN: "iban",
	USSSN: "us_ssn", UKNINO: "uk_nino", ESDNI: "es_dni", ITCF: "it_cf", BRCPF: "br_cpf",
	IPv4: "ipv4", IPv6: "ipv6", Secret: "secret",
}

var kindLabels = [numKinds]string{
	Email: "EMAIL", Phone: "PHONE", Card: "CARD", IBAN: "IBAN",
	USSSN: "US_SSN", UKNINO: "UK_NINO", ESDNI: "ES_DNI", ITCF: "IT_CF", BRCPF: "BR_CPF",
	IPv4: "IP", IPv6: "IP", Secret: "SECRET",
}

// String is the kind's name in configuration: "email", "us_ssn", …
func (k Kind) String() string {
	if k > 0 && k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Label is the kind's name in placeholders: "EMAIL", "US_SSN", "IP" (both
// IP versions share it), …
func (k Kind) Label() string {
	if k > 0 && k < numKinds {
		return kindLabels[k]
	}
	return "PII"
}

// Valid reports whether k is one of the kinds above.
func (k Kind) Valid() bool { return k > 0 && k < numKinds }

// Set is a set of kinds.
type Set uint32

// All is every kind.
const All Set = 1<<numKinds - 2

// NationalIDs is the national identity numbers.
const NationalIDs Set = 1<<USSSN | 1<<UKNINO | 1<<ESDNI | 1<<ITCF | 1<<BRCPF

// IPs is both IP versions.
const IPs Set = 1<<IPv4 | 1<<IPv6

// SetOf returns the set of the given kinds.
func SetOf(kinds ...Kind) Set {
	var s Set
	for _, k := range kinds {
		s |= 1 << k
	}
	return s
}

// Has reports whether k is in s.
func (s Set) Has(k Kind) bool { return s&(1<<k) != 0 }

// Kinds returns the kinds in s, in order.
func (s Set) Kinds() []Kind {
	var ks []Kind
	for k := Kind(1); k < numKinds; k++ {
		if s.Has(k) {
			ks = append(ks, k)
		}
	}
	return ks
}

// ParseSet reads a detector name as configuration writes it: a kind's
// name, or a group — "national_id" (every national id), "ip" (both IP
// versions), "all". false for an unknown name.
func ParseSet(name string) (Set, bool) {
	switch name {
	case "national_id":
		return NationalIDs, true
	case "ip":
		return IPs, true
	case "all":
		return All, true
	}
	for k := Kind(1); k < numKinds; k++ {
		if kindNames[k] == name {
			return 1 << k, true
		}
	}
	return 0, false
}

// Names lists the names ParseSet accepts, for error messages.
const Names = "email, phone, card, iban, national_id (us_ssn, uk_nino, es_dni, it_cf, br_cpf), ip (ipv4, ipv6), secret, all"
