package tenantspec

import (
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// PriceConfig declares a tenant.Price: USD per million tokens (at most 6
// decimals) from EffectiveFrom on (zero: always). The rates of the kinds
// of token and the bounds are optional: 0 is unset, and an unset field
// of a model the price catalog knows comes from the catalog
// (docs/POLICY.md, "Prices").
type PriceConfig struct {
	Model            string  `yaml:"model"`
	InputUSDPerMTok  float64 `yaml:"input_usd_per_mtok"`
	OutputUSDPerMTok float64 `yaml:"output_usd_per_mtok"`

	// Rates of the kinds of token; unset falls back to the catalog's,
	// else to the input (the first four) or output rate.
	CachedInputUSDPerMTok float64 `yaml:"cached_input_usd_per_mtok"`
	CacheWriteUSDPerMTok  float64 `yaml:"cache_write_usd_per_mtok"`
	AudioInputUSDPerMTok  float64 `yaml:"audio_input_usd_per_mtok"`
	ImageInputUSDPerMTok  float64 `yaml:"image_input_usd_per_mtok"`
	ReasoningUSDPerMTok   float64 `yaml:"reasoning_usd_per_mtok"`
	AudioOutputUSDPerMTok float64 `yaml:"audio_output_usd_per_mtok"`
	ImageOutputUSDPerMTok float64 `yaml:"image_output_usd_per_mtok"`

	// ContextWindow is the most input tokens a request can have,
	// MaxOutputTokens the most output tokens of a reply without
	// max_tokens, ImageTokens the most input tokens one image counts for.
	ContextWindow   int64 `yaml:"context_window"`
	MaxOutputTokens int64 `yaml:"max_output_tokens"`
	ImageTokens     int64 `yaml:"image_tokens"`
	// Reasoning marks a model whose replies may hold hidden reasoning
	// tokens (its streamed text does not bound its output).
	Reasoning bool `yaml:"reasoning"`

	EffectiveFrom time.Time `yaml:"effective_from"`
}

// BuildPrice validates pc and returns its price; the error joins one
// *ConfigError per problem, at paths relative to the price.
func BuildPrice(pc PriceConfig) (*tenant.Price, error) {
	p, errs := pc.build("")
	if len(errs) > 0 {
		for _, e := range errs {
			if ce, ok := e.(*ConfigError); ok {
				ce.Path = ce.Path[1:] // no leading "."
			}
		}
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// build converts pc; problems are reported at paths under at.
func (pc *PriceConfig) build(at string) (*tenant.Price, []error) {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Path: at + "." + field, Message: fmt.Sprintf(format, args...)})
	}
	if pc.Model == "" {
		add("model", "is required")
	} else if len(pc.Model) > 200 {
		add("model", "is longer than 200 bytes")
	}
	p := &tenant.Price{Model: pc.Model, EffectiveFrom: pc.EffectiveFrom,
		ContextWindow: pc.ContextWindow, MaxOutputTokens: pc.MaxOutputTokens, ImageTokens: pc.ImageTokens, Reasoning: pc.Reasoning}
	for _, r := range []struct {
		field string
		usd   float64
		dst   *int64
	}{
		{"input_usd_per_mtok", pc.InputUSDPerMTok, &p.InputMicrosPerMTok},
		{"output_usd_per_mtok", pc.OutputUSDPerMTok, &p.OutputMicrosPerMTok},
		{"cached_input_usd_per_mtok", pc.CachedInputUSDPerMTok, &p.CachedInputMicrosPerMTok},
		{"cache_write_usd_per_mtok", pc.CacheWriteUSDPerMTok, &p.CacheWriteMicrosPerMTok},
		{"audio_input_usd_per_mtok", pc.AudioInputUSDPerMTok, &p.AudioInputMicrosPerMTok},
		{"image_input_usd_per_mtok", pc.ImageInputUSDPerMTok, &p.ImageInputMicrosPerMTok},
		{"reasoning_usd_per_mtok", pc.ReasoningUSDPerMTok, &p.ReasoningMicrosPerMTok},
		{"audio_output_usd_per_mtok", pc.AudioOutputUSDPerMTok, &p.AudioOutputMicrosPerMTok},
		{"image_output_usd_per_mtok", pc.ImageOutputUSDPerMTok, &p.ImageOutputMicrosPerMTok},
	} {
		n, err := usdToMicros(r.usd)
		if err != nil {
			add(r.field, "%v", err)
		}
		*r.dst = n
	}
	for _, b := range []struct {
		field string
		n     int64
	}{{"context_window", pc.ContextWindow}, {"max_output_tokens", pc.MaxOutputTokens}, {"image_tokens", pc.ImageTokens}} {
		if b.n < 0 {
			add(b.field, "must not be negative, got %d", b.n)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return p, nil
}
