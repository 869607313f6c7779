package provider

import (
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/config"
)

func TestAzurePassthroughPath(t *testing.T) {
	dated := newAzureAdapter(&config.Azure{APIVersion: "2025-04-01-preview"})
	v1 := newAzureAdapter(&config.Azure{APIVersion: config.AzureAPIV1})
	tests := []struct {
		a        *Azure
		p, model string
		want     string // "" for not addressed
	}{
		{dated, "/images/generations", "gpt-image-1", "/openai/deployments/gpt-image-1/images/generations?api-version=2025-04-01-preview"},
		{dated, "/audio/transcriptions", "my stt/1", "/openai/deployments/my%20stt%2F1/audio/transcriptions?api-version=2025-04-01-preview"},
		{dated, "/audio/speech", "tts", "/openai/deployments/tts/audio/speech?api-version=2025-04-01-preview"},
		{dated, "/files", "", "/openai/files?api-version=2025-04-01-preview"},
		{dated, "/files/file-1/content", "", "/openai/files/file-1/content?api-version=2025-04-01-preview"},
		{dated, "/batches?after=b-1&limit=2", "", "/openai/batches?after=b-1&limit=2&api-version=2025-04-01-preview"},
		{dated, "/moderations", "omni", ""},
		{v1, "/images/edits", "gpt-image-1", "/openai/v1/images/edits"},
		{v1, "/files?purpose=batch", "", "/openai/v1/files?purpose=batch"},
		{v1, "/moderations", "omni", ""},
	}
	for _, tt := range tests {
		got, ok := tt.a.AppendPassthroughPath([]byte("x"), tt.p, tt.model)
		if tt.want == "" {
			if ok || string(got) != "x" {
				t.Errorf("%s: %q %v; want not addressed", tt.p, got, ok)
			}
			continue
		}
		if !ok || string(got) != "x"+tt.want {
			t.Errorf("%s (%s): %q %v; want %q", tt.p, tt.model, got, ok, tt.want)
		}
	}
}
