package pricing

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/tenantspec"
)

//go:embed catalog/*.yaml
var catalogFiles embed.FS

// Catalog is a parsed price catalog. It is immutable once built.
type Catalog struct {
	// Version is the catalog's date ("2026-12-01"): its prices are the
	// list prices of that day.
	Version  string
	exact    map[string]*tenant.Price // by model and alias
	patterns []pattern                // in file order
}

type pattern struct {
	glob  string
	price *tenant.Price
}

// file is a catalog file's shape.
type file struct {
	Version string  `yaml:"version"`
	Models  []entry `yaml:"models"`
}

// entry is one model of a catalog file: a policy price (without
// effective_from) and the other names it answers to.
type entry struct {
	tenantspec.PriceConfig `yaml:",inline"`
	Aliases                []string `yaml:"aliases"`
	Patterns               []string `yaml:"patterns"`
}

// Embedded returns the newest catalog built into the binary (the file
// whose name, its version date, sorts last).
func Embedded() (*Catalog, error) {
	names, err := fs.Glob(catalogFiles, "catalog/*.yaml")
	if err != nil || len(names) == 0 {
		return nil, fmt.Errorf("price catalog: no embedded catalog (%v)", err)
	}
	slices.Sort(names)
	name := names[len(names)-1]
	b, err := catalogFiles.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("price catalog %s: %w", name, err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("price catalog %s: %w", name, err)
	}
	if want := path.Base(name); want != c.Version+".yaml" {
		return nil, fmt.Errorf("price catalog %s: version %q does not match the file name", name, c.Version)
	}
	return c, nil
}

// Parse reads a catalog file strictly (unknown fields are errors) and
// checks every entry: its rates as a policy price's, every name and
// pattern given once, every pattern valid.
func Parse(b []byte) (*Catalog, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if _, err := time.Parse(time.DateOnly, f.Version); err != nil {
		return nil, fmt.Errorf("version must be a date (YYYY-MM-DD), got %q", f.Version)
	}
	c := &Catalog{Version: f.Version, exact: make(map[string]*tenant.Price, 2*len(f.Models))}
	source := "catalog " + f.Version
	var errs []error
	seen := make(map[string]bool)
	for i := range f.Models {
		e := &f.Models[i]
		at := fmt.Sprintf("models[%d] (%s)", i, e.Model)
		if !e.EffectiveFrom.IsZero() {
			errs = append(errs, fmt.Errorf("%s: effective_from is the catalog's version, not set per model", at))
		}
		p, err := tenantspec.BuildPrice(e.PriceConfig)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
			continue
		}
		p.Source = source
		for _, name := range append([]string{e.Model}, e.Aliases...) {
			if seen[name] {
				errs = append(errs, fmt.Errorf("%s: %q is named twice", at, name))
			}
			seen[name] = true
			c.exact[name] = p
		}
		for _, g := range e.Patterns {
			if _, err := path.Match(g, ""); err != nil || seen["pattern "+g] {
				errs = append(errs, fmt.Errorf("%s: pattern %q is invalid or given twice", at, g))
			}
			seen["pattern "+g] = true
			c.patterns = append(c.patterns, pattern{g, p})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// Lookup returns the catalog's price of model: the entry naming it (model
// or alias), else the first whose pattern matches it. The price is shared:
// never modify it.
func (c *Catalog) Lookup(model string) (*tenant.Price, bool) {
	if c == nil {
		return nil, false
	}
	if p, ok := c.exact[model]; ok {
		return p, true
	}
	for _, pt := range c.patterns {
		if ok, _ := path.Match(pt.glob, model); ok {
			return pt.price, true
		}
	}
	return nil, false
}

// Len is the number of names (models and aliases) the catalog knows,
// patterns aside.
func (c *Catalog) Len() int { return len(c.exact) }
