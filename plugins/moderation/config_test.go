package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	contentType := [2]string{"Content-Type", "application/json"}
	tests := []struct {
		name string
		in   string
		want config
	}{
		{"defaults", `{"endpoint":"http://127.0.0.1:9/v1/moderations"}`,
			config{endpoint: "http://127.0.0.1:9/v1/moderations", model: defaultModel, checkRequest: true,
				cacheTTL: defaultCacheTTL, callHeaders: [][2]string{contentType}, correction: defaultCorrection}},
		{"every key", `{"endpoint":"https://api.openai.com/v1/moderations","model":"m","categories":{"violence":0.7,"hate":1},
			"check":{"request":false,"reply":true,"stream":true},"cache_ttl":"0s","headers":{"X-Team":"a b"},"correction":"no."}`,
			config{endpoint: "https://api.openai.com/v1/moderations", model: "m",
				thresholds: []threshold{{"violence", 0.7}, {"hate", 1}}, checkReply: true, checkStream: true,
				headers: [][2]string{{"X-Team", "a b"}}, callHeaders: [][2]string{contentType, {"X-Team", "a b"}}, correction: "no."}},
		{"cache ttl", `{"endpoint":"https://x/","cache_ttl":"90s"}`,
			config{endpoint: "https://x/", model: defaultModel, checkRequest: true, cacheTTL: 90 * time.Second,
				callHeaders: [][2]string{contentType}, correction: defaultCorrection}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfig([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{`[]`, "must be a JSON object"},
		{`{}`, `"endpoint" is required`},
		{`{"endpoint":"ftp://x/"}`, "must be an http or https URL"},
		{`{"endpoint":"https://x/ y"}`, "must not contain spaces"},
		{`{"endpoint":"https://x/","model":""}`, `"model" must not be empty`},
		{`{"endpoint":"https://x/","categories":{"violence":0}}`, `"categories.violence" is 0`},
		{`{"endpoint":"https://x/","categories":{"violence":1.5}}`, "at most 1"},
		{`{"endpoint":"https://x/","categories":{"violence":"high"}}`, "must be a number"},
		{`{"endpoint":"https://x/","categories":{"hate":0.5,"hate":0.6}}`, "given twice"},
		{`{"endpoint":"https://x/","check":{"request":false}}`, "turns every check off"},
		{`{"endpoint":"https://x/","check":{"replies":true}}`, "unknown key check.replies"},
		{`{"endpoint":"https://x/","check":{"reply":"yes"}}`, `"check.reply" must be true or false`},
		{`{"endpoint":"https://x/","cache_ttl":"2h"}`, `"cache_ttl" is "2h"`},
		{`{"endpoint":"https://x/","cache_ttl":"soon"}`, `"cache_ttl" is "soon"`},
		{`{"endpoint":"https://x/","headers":{"Bad Name":"v"}}`, "invalid header name"},
		{`{"endpoint":"https://x/","headers":{"X":"a\nb"}}`, "invalid header name, or a value"},
		{`{"endpoint":"https://x/","correction":"` + strings.Repeat("x", 5000) + `"}`, "longer than 4096"},
		{`{"endpoint":"https://x/","threshold":1}`, `unknown key "threshold"`},
		{`{"endpoint":"https://x/"} x`, "unexpected data"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := parseConfig([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}
