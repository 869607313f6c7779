// Package detect finds personal data and secrets in text: e-mail
// addresses, phone numbers, payment cards, IBANs, national identity
// numbers, IP addresses and credentials with well-known prefixes. It is
// plain Go with no dependency on the plugin SDK, so it is tested natively
// and runs unchanged inside the pii plugin's WebAssembly module.
//
// A [Scanner] reads text once, left to right, and reports non-overlapping
// [Span]s in order. Every detector is a hand-written matcher bounded in
// how far it looks from where it starts, and matching starts only at word
// starts, so a scan is linear in the text whatever it holds; there are no
// regular expressions to backtrack. Checksums (Luhn, mod 97, the national
// ids' check letters and digits) are what keep numbers that merely look
// like the data out; the corpus under testdata/ holds both sides.
package detect
