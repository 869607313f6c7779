package calllog

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// The token kinds reach call_log's columns (0 stored as 0 when the usage
// was reported, NULL when it was not) and survive the spool.
func TestWriteStoresTokenKinds(t *testing.T) {
	t.Parallel()
	kinds := TokenKinds{Reported: true, CachedInput: 1, CacheWrite: 2, AudioInput: 3, ImageInput: 4,
		Reasoning: 5, AudioOutput: 6, ImageOutput: 7}
	reported := row("kinds", "acme", 10)
	reported.Kinds = kinds
	zero := row("zero-kinds", "acme", 10)
	zero.Kinds = TokenKinds{Reported: true}
	unreported := row("no-kinds", "acme", 10)

	// The spool keeps them.
	back, _, _, err := readRecord(bufio.NewReader(bytes.NewReader(appendRecord(nil, &reported))), nil)
	if err != nil || !reflect.DeepEqual(back.Kinds, kinds) {
		t.Fatalf("spool read back %+v, %v; want %+v", back.Kinds, err, kinds)
	}
	back, _, _, err = readRecord(bufio.NewReader(bytes.NewReader(appendRecord(nil, &unreported))), nil)
	if err != nil || back.Kinds != (TokenKinds{}) {
		t.Fatalf("spool read back %+v, %v; want none", back.Kinds, err)
	}

	pool := newDB(t)
	w := newWriter(t, pool, Options{})
	write(t, w, reported, zero, unreported)
	closeWriter(t, w)
	tests := []struct {
		id   string
		want [7]pgtype.Int8
	}{
		{"kinds", [7]pgtype.Int8{{Int64: 1, Valid: true}, {Int64: 2, Valid: true}, {Int64: 3, Valid: true}, {Int64: 4, Valid: true},
			{Int64: 5, Valid: true}, {Int64: 6, Valid: true}, {Int64: 7, Valid: true}}},
		{"zero-kinds", [7]pgtype.Int8{{Valid: true}, {Valid: true}, {Valid: true}, {Valid: true}, {Valid: true}, {Valid: true}, {Valid: true}}},
		{"no-kinds", [7]pgtype.Int8{}},
	}
	for _, tt := range tests {
		var got [7]pgtype.Int8
		err := pool.QueryRow(t.Context(), `
SELECT cached_input_tokens, cache_write_tokens, audio_input_tokens, image_input_tokens,
       reasoning_tokens, audio_output_tokens, image_output_tokens
  FROM call_log WHERE request_id = $1`, tt.id).Scan(&got[0], &got[1], &got[2], &got[3], &got[4], &got[5], &got[6])
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("%s: stored %+v, want %+v", tt.id, got, tt.want)
		}
	}
}
