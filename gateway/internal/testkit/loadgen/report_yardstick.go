package loadgen

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// writeYardstick writes one table for the whole report: for every section
// (mode, and pin mode where the run had several) and target, the target's
// throughput as a share of cfg.Yardstick's at each level (medians over
// rounds), and its added p50 over the baseline at the lowest level. The
// yardstick's own row gives its rate. Nothing is written without a
// yardstick or when no section measured it.
func writeYardstick(b *strings.Builder, cfg ReportConfig, bySection [][]cell) {
	if cfg.Yardstick == "" {
		return
	}
	var levels []int
	measured := false
	for _, cs := range bySection {
		for _, c := range cs {
			if !slices.Contains(levels, c.level) {
				levels = append(levels, c.level)
			}
			measured = measured || c.target == cfg.Yardstick
		}
	}
	if !measured {
		return
	}
	slices.Sort(levels)
	low := levels[0]
	fmt.Fprintf(b, "**Throughput as a share of %s's** (req/s or streams/s, medians over rounds), and the p50 added over %s at c=%d\n\n",
		cfg.Yardstick, cfg.Baseline, low)
	b.WriteString("| mode | target |")
	for _, lv := range levels {
		fmt.Fprintf(b, " c=%d |", lv)
	}
	fmt.Fprintf(b, " added p50 µs, c=%d |\n|---|---|", low)
	b.WriteString(strings.Repeat("---:|", len(levels)+1))
	b.WriteString("\n")
	for i, s := range cfg.Sections {
		cs := bySection[i]
		for _, t := range targetsOf(cs) {
			if t == cfg.Baseline {
				continue
			}
			fmt.Fprintf(b, "| %s | %s |", s.Name, t)
			for _, lv := range levels {
				c, y := find(cs, t, lv), find(cs, cfg.Yardstick, lv)
				switch {
				case c == nil:
					b.WriteString(" – |")
				case t == cfg.Yardstick:
					fmt.Fprintf(b, " %s/s |", num(c.rps, 0))
				default:
					fmt.Fprintf(b, " %s |", share(c, y))
				}
			}
			added := math.NaN()
			if c := find(cs, t, low); c != nil {
				added = c.added50
			}
			fmt.Fprintf(b, " %s |\n", signed(added))
		}
	}
	b.WriteString("\n")
}

// share formats c's rate as a percentage of y's.
func share(c, y *cell) string {
	if y == nil || math.IsNaN(c.rps) || math.IsNaN(y.rps) || y.rps <= 0 {
		return "–"
	}
	return strconv.FormatFloat(100*c.rps/y.rps, 'f', 0, 64) + "%"
}

// targetsOf lists the targets of cells in row order, each once.
func targetsOf(cs []cell) []string {
	var ts []string
	for _, c := range cs {
		if !slices.Contains(ts, c.target) {
			ts = append(ts, c.target)
		}
	}
	return ts
}
