package detect

import (
	"strings"
	"testing"
)

func TestChecksums(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
		got  bool
	}{
		{"luhn 4111111111111111", true, luhn([]byte("4111111111111111"))},
		{"luhn 4111111111111112", false, luhn([]byte("4111111111111112"))},
		{"luhn 79927398713", true, luhn([]byte("79927398713"))},
		{"mod97 GB82WEST12345698765432", true, mod97([]byte("GB82WEST12345698765432"))},
		{"mod97 GB82WEST12345698765433", false, mod97([]byte("GB82WEST12345698765433"))},
		{"mod97 BE68539007547034", true, mod97([]byte("BE68539007547034"))},
		{"iin visa 16", true, knownIIN([]byte("4111111111111111"))},
		{"iin visa 15", false, knownIIN([]byte("411111111111111"))},
		{"iin amex 15", true, knownIIN([]byte("378282246310005"))},
		{"iin amex 16", false, knownIIN([]byte("3782822463100050"))},
		{"iin 9", false, knownIIN([]byte("9111111111111111"))},
	}
	for _, tt := range tests {
		if tt.got != tt.ok {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.ok)
		}
	}
}

func TestPrivateIPs(t *testing.T) {
	text := []byte("lan 192.168.1.1, lo 127.0.0.1, v6 fd00::1 and fe80::1, public 8.8.8.8")
	tests := []struct {
		private bool
		want    []string
	}{
		{false, []string{"8.8.8.8"}},
		{true, []string{"192.168.1.1", "127.0.0.1", "fd00::1", "fe80::1", "8.8.8.8"}},
	}
	for _, tt := range tests {
		s := New(Options{Kinds: IPs, PrivateIPs: tt.private})
		var got []string
		for _, sp := range s.Append(nil, text) {
			got = append(got, string(text[sp.Start:sp.End]))
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("private %v: got %q, want %q", tt.private, got, tt.want)
		}
	}
}

func TestParseSet(t *testing.T) {
	tests := []struct {
		name string
		want Set
		ok   bool
	}{
		{"email", SetOf(Email), true},
		{"national_id", SetOf(USSSN, UKNINO, ESDNI, ITCF, BRCPF), true},
		{"ip", SetOf(IPv4, IPv6), true},
		{"all", All, true},
		{"secret", SetOf(Secret), true},
		{"ssn", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseSet(tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%q: got %b %v, want %b %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	if len(All.Kinds()) != int(numKinds)-1 {
		t.Errorf("All has %d kinds", len(All.Kinds()))
	}
	for _, k := range All.Kinds() {
		if s, ok := ParseSet(k.String()); !ok || s != SetOf(k) {
			t.Errorf("%v does not parse back", k)
		}
	}
}

// TestScanAllocs: a scan into a slice with room allocates nothing.
func TestScanAllocs(t *testing.T) {
	text := []byte(benchPrompt(10 << 10))
	s := New(Options{})
	dst := s.Append(nil, text)
	if len(dst) < 20 {
		t.Fatalf("the prompt has %d spans", len(dst))
	}
	if n := testing.AllocsPerRun(20, func() { dst = s.Append(dst[:0], text) }); n != 0 {
		t.Errorf("%v allocations per scan", n)
	}
}
