package doccheck

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// tableRow is a row of a Markdown table: its first cell, and its line.
type tableRow struct {
	first string
	line  int
}

// commandRows returns the first cells of the body rows of the tables under
// the heading "Commands", up to the next heading.
func commandRows(src []byte) []tableRow {
	p := parse(src)
	var rows []tableRow
	in := false
	for i, line := range strings.Split(string(src), "\n") {
		if p.fenced[i] {
			continue
		}
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			in = headingText(m[1]) == "Commands"
			continue
		}
		t := strings.TrimSpace(line)
		if !in || !strings.HasPrefix(t, "|") {
			continue
		}
		cell := firstCell(t[1:])
		if strings.Trim(cell, " :-") == "" {
			continue // the delimiter row
		}
		rows = append(rows, tableRow{first: cell, line: i + 1})
	}
	if len(rows) > 0 {
		rows = rows[1:] // the header row
	}
	return rows
}

// firstCell is a row's text up to its first unescaped pipe: GitHub ends a
// cell there even inside a code span, which is why tables write \|.
func firstCell(row string) string {
	for i := 0; i < len(row); i++ {
		switch row[i] {
		case '\\':
			i++
		case '|':
			return strings.TrimSpace(row[:i])
		}
	}
	return strings.TrimSpace(row)
}

// checkCommands checks the README's command table: each code span of a
// row's first cell is `make TARGET ...` (checked with the other make calls)
// or a program of Programs with subcommands its usage lists and flags its
// help prints.
func (r *Repo) checkCommands(doc string, src []byte) ([]Problem, error) {
	rows := commandRows(src)
	if len(rows) == 0 {
		return []Problem{{File: doc, Line: 1, Msg: `no command table (a table under a "Commands" heading)`}}, nil
	}
	var problems []Problem
	for _, row := range rows {
		for _, c := range parse([]byte(row.first)).code {
			if strings.HasPrefix(c.Text, "make ") {
				continue
			}
			msgs, err := r.checkCommand(ParseCommand(c.Text))
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				problems = append(problems, Problem{File: doc, Line: row.line, Msg: fmt.Sprintf("`%s`: %s", c.Text, m)})
			}
		}
	}
	return problems, nil
}

// checkCodeCommands checks every command line in the document's code that
// runs one of Programs (as NAME, bin/NAME or $BIN/NAME, after any VAR=value
// prefixes), as the command table's are checked; lines in skip are left
// to checkCommands.
func (r *Repo) checkCodeCommands(doc string, src []byte, skip map[int]bool) ([]Problem, error) {
	var problems []Problem
	for _, c := range parse(src).code {
		if skip[c.Line] {
			continue
		}
		for i, line := range strings.Split(c.Text, "\n") {
			line = shellComment.ReplaceAllString(line, "")
			for _, cmd := range commandSep.Split(line, -1) {
				words := strings.Fields(cmd)
				for len(words) > 0 && strings.Contains(words[0], "=") {
					words = words[1:]
				}
				if len(words) == 0 {
					continue
				}
				words[0] = strings.TrimPrefix(strings.TrimPrefix(words[0], "bin/"), "$BIN/")
				if _, ok := r.Programs[words[0]]; !ok {
					continue
				}
				text := strings.Join(words, " ")
				msgs, err := r.checkCommand(ParseCommand(text))
				if err != nil {
					return nil, err
				}
				for _, m := range msgs {
					problems = append(problems, Problem{File: doc, Line: c.Line + i, Msg: fmt.Sprintf("`%s`: %s", text, m)})
				}
			}
		}
	}
	return problems, nil
}

func (r *Repo) checkCommand(c Command) ([]string, error) {
	help, ok := r.Programs[c.Program]
	if !ok {
		names := make([]string, 0, len(r.Programs))
		for n := range r.Programs {
			names = append(names, n)
		}
		sort.Strings(names)
		return []string{fmt.Sprintf("%q is not a program the repository builds (%s)", c.Program, strings.Join(names, ", "))}, nil
	}
	text, err := help("-h")
	if err != nil {
		return nil, fmt.Errorf("%s -h: %w", c.Program, err)
	}
	if len(c.Path) > 0 {
		first := strings.Split(c.Path[0], "|")[0]
		sub, err := help(first, "-h")
		if err != nil {
			return nil, fmt.Errorf("%s %s -h: %w", c.Program, first, err)
		}
		text += "\n" + sub
	}
	var msgs []string
	paths := UsagePaths(c.Program, text)
	for _, p := range expand(c.Path) {
		if len(p) == 0 {
			break // the program alone
		}
		if !listsPath(paths, p) {
			msgs = append(msgs, fmt.Sprintf("%s's usage lists no subcommand %q", c.Program, strings.Join(p, " ")))
		}
	}
	known := FlagNames(text)
	for _, f := range c.Flags {
		if !slices.Contains(known, f) {
			msgs = append(msgs, fmt.Sprintf("%s's help shows no flag -%s", commandName(c), f))
		}
	}
	return msgs, nil
}

func commandName(c Command) string {
	return strings.Join(append([]string{c.Program}, c.Path...), " ")
}
