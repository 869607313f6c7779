package main

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/plugins/pii/detect"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		cfg   string
		mode  mode
		reply replyMode
		kinds detect.Set
		roles string
	}{
		{`{}`, modeRedact, replyOff, detect.All, "user,assistant,tool"},
		{`{"mode":"mask-and-restore"}`, modeMask, replyRestore, detect.All, "user,assistant,tool"},
		{`{"mode":"mask-and-restore","reply":"off"}`, modeMask, replyOff, detect.All, "user,assistant,tool"},
		{`{"mode":"reject","reply":"redact","detectors":["email","ip"]}`, modeReject, replyRedact,
			detect.SetOf(detect.Email, detect.IPv4, detect.IPv6), "user,assistant,tool"},
		{`{"detectors":["national_id","secret"],"roles":["user"]}`, modeRedact, replyOff,
			detect.NationalIDs | detect.SetOf(detect.Secret), "user"},
	}
	for _, tt := range tests {
		p, err := parseConfig([]byte(tt.cfg))
		if err != nil {
			t.Errorf("%s: %v", tt.cfg, err)
			continue
		}
		if p.mode != tt.mode || p.reply != tt.reply || p.scanner.Kinds() != tt.kinds || strings.Join(p.roles, ",") != tt.roles {
			t.Errorf("%s: mode %v reply %v kinds %v roles %v", tt.cfg, p.mode, p.reply, p.scanner.Kinds().Kinds(), p.roles)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct{ cfg, want string }{
		{`[]`, "must be a JSON object"},
		{`{"mode":"block"}`, `"mode" is "block"`},
		{`{"modes":"reject"}`, `unknown key "modes"`},
		{`{"detectors":["email","ssn"]}`, `detectors[1] is "ssn"`},
		{`{"detectors":[]}`, `"detectors" is empty`},
		{`{"reply":"restore"}`, `needs mode "mask-and-restore"`},
		{`{"mode":"mask-and-restore","reply":"redact"}`, `would redact the originals`},
		{`{"reply":"sometimes"}`, `"reply" is "sometimes"`},
		{`{"placeholder":"{KIND}_{N}"}`, "must start with literal text"},
		{`{"placeholder":"[{N}]"}`, "must contain {KIND} and {N}"},
		{`{"placeholder":"[{KIND}{N}]"}`, "must separate {KIND} and {N}"},
		{`{"placeholder":"[{KIND}_{N}"}`, "must have literal text after {N}"},
		{`{"placeholder":"[{KIND}_{N}7]"}`, "must not have a digit right after {N}"},
		{`{"placeholder":"[{KIND}_{N}_{N}]"}`, "once each"},
		{`{"roles":[]}`, `"roles" is empty`},
		{`{"roles":[""]}`, `roles[0] is empty`},
		{`{"reject_status":200}`, `"reject_status" is 200`},
		{`{"reject_message":""}`, `"reject_message" must be 1 to 4096 bytes`},
		{`{"private_ips":"yes"}`, `"private_ips" must be true or false`},
	}
	for _, tt := range tests {
		if _, err := parseConfig([]byte(tt.cfg)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

func TestTemplate(t *testing.T) {
	tests := []struct{ tpl, want string }{
		{"[{KIND}_{N}]", "[US_SSN_12]"},
		{"<{N}:{KIND}>", "<12:US_SSN>"},
		{"{{{KIND}#{N}}}", "{{US_SSN#12}}"},
	}
	for _, tt := range tests {
		tp, err := parseTemplate(tt.tpl)
		if err != nil {
			t.Fatalf("%s: %v", tt.tpl, err)
		}
		if got := string(tp.appendTo(nil, detect.USSSN, 12)); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.tpl, got, tt.want)
		}
	}
}
