package doccheck

import (
	"regexp"
	"slices"
	"strings"
)

// ruleLine matches a Makefile rule's target list: names before a single
// or double colon that does not start an assignment (:=, ::=).
var ruleLine = regexp.MustCompile(`^([A-Za-z0-9_.%/$(){}-][A-Za-z0-9_.%/$(){} \t-]*?)[ \t]*::?(?:[^=]|$)`)

// MakeTargets returns the targets the Makefile defines rules for (special
// targets such as .PHONY left out). Recipe lines (tab-indented),
// comments and variable assignments define none.
func MakeTargets(makefile []byte) map[string]bool {
	targets := map[string]bool{}
	for _, line := range strings.Split(string(makefile), "\n") {
		if strings.HasPrefix(line, "\t") || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		m := ruleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if eq := strings.IndexByte(line, '='); eq >= 0 && eq < len(m[1]) {
			continue // NAME = value: with a colon later in the value
		}
		for _, t := range strings.Fields(m[1]) {
			if !strings.HasPrefix(t, ".") {
				targets[t] = true
			}
		}
	}
	return targets
}

// shellComment is a shell comment: # at the start or after a blank.
var shellComment = regexp.MustCompile(`(^|[ \t])#.*`)

// commandSep splits a shell line into simple commands.
var commandSep = regexp.MustCompile(`&&|\|\||[;|()&]`)

// makeArgFlags are make's options that take the next word as their value.
var makeArgFlags = map[string]bool{"-C": true, "-f": true, "-I": true, "-o": true, "-W": true}

// MakeInvocations returns the targets a piece of code asks make for: in
// each simple command whose program is make (after any VAR=value
// prefixes), the words that are neither VAR=value assignments nor options.
// Shell comments are left out.
func MakeInvocations(code string) []string {
	var targets []string
	for _, line := range strings.Split(code, "\n") {
		line = shellComment.ReplaceAllString(line, "")
		for _, cmd := range commandSep.Split(line, -1) {
			words := strings.Fields(cmd)
			for len(words) > 0 && strings.Contains(words[0], "=") {
				words = words[1:]
			}
			if len(words) == 0 || words[0] != "make" {
				continue
			}
			for i := 1; i < len(words); i++ {
				w := words[i]
				switch {
				case makeArgFlags[w]:
					i++
				case strings.HasPrefix(w, "-") || strings.Contains(w, "="):
				case validTarget.MatchString(w):
					targets = append(targets, w)
				}
			}
		}
	}
	return targets
}

var validTarget = regexp.MustCompile(`^[A-Za-z0-9_./-]+$`)

// Command is one command line as a document shows it.
type Command struct {
	Program string
	// Path is the subcommand words after the program, up to the first
	// argument, placeholder, bracket or flag; "build|test" stays one word.
	Path  []string
	Flags []string // flag names without their dashes
}

// subcommandWord is a word a usage line spells as a subcommand: lower
// case, alternatives joined by |.
var subcommandWord = regexp.MustCompile(`^[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*$`)

// flagToken matches a flag where a command line or help text shows one:
// -name or --name at the start of a word, or after [ ( | or a comma.
var flagToken = regexp.MustCompile(`(?:^|[\s\[(|,])--?([A-Za-z][A-Za-z0-9-]*)`)

// ParseCommand reads a command line as the README's command table writes
// it (`tollgate plugin build DIR [-o FILE]`): Markdown's escaped pipes
// (\|) are pipes.
func ParseCommand(line string) Command {
	line = strings.ReplaceAll(line, `\|`, "|")
	words := strings.Fields(line)
	if len(words) == 0 {
		return Command{}
	}
	c := Command{Program: words[0]}
	for _, w := range words[1:] {
		if !subcommandWord.MatchString(w) {
			break
		}
		c.Path = append(c.Path, w)
	}
	c.Flags = FlagNames(strings.Join(words[1:], " "))
	return c
}

// FlagNames returns every flag name text shows, in order, each once.
func FlagNames(text string) []string {
	var names []string
	seen := map[string]bool{}
	for _, m := range flagToken.FindAllStringSubmatch(text, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			names = append(names, m[1])
		}
	}
	return names
}

// UsagePaths returns the subcommand paths a program's usage text lists:
// for each line whose first word is the program (after "usage:" if any),
// the subcommand words that follow, one path per alternative
// ("plugin build|test DIR" lists plugin build and plugin test). Optional
// groups right after them name more: "migrate [-dsn-env VAR] [up | status]"
// lists migrate, migrate up and migrate status.
func UsagePaths(program, usage string) [][]string {
	var paths [][]string
	for _, line := range strings.Split(usage, "\n") {
		words := strings.Fields(line)
		if len(words) > 0 && strings.EqualFold(words[0], "usage:") {
			words = words[1:]
		}
		if len(words) == 0 || words[0] != program {
			continue
		}
		n := 1
		for n < len(words) && subcommandWord.MatchString(words[n]) {
			n++
		}
		base := expand(words[1:n])
		paths = append(paths, base...)
		for _, word := range optionalWords(strings.Join(words[n:], " ")) {
			for _, b := range base {
				paths = append(paths, append(slices.Clone(b), word))
			}
		}
	}
	return paths
}

// optionalGroups matches the bracketed groups at the start of the rest of a
// usage line.
var optionalGroups = regexp.MustCompile(`^(?:\s*\[[^\[\]]*\])+`)

// optionalWords returns the subcommand words that open the alternatives of
// the optional groups rest starts with: "[-v] [up | down-to N]" gives up
// and down-to.
func optionalWords(rest string) []string {
	var words []string
	for _, group := range strings.Split(optionalGroups.FindString(rest), "]") {
		group = strings.TrimLeft(strings.TrimSpace(group), "[")
		for _, alt := range strings.Split(group, "|") {
			if f := strings.Fields(alt); len(f) > 0 && subcommandWord.MatchString(f[0]) {
				words = append(words, f[0])
			}
		}
	}
	return words
}

// expand returns every path a path with alternatives stands for:
// [plugin build|test] is [plugin build] and [plugin test].
func expand(path []string) [][]string {
	paths := [][]string{nil}
	for _, w := range path {
		var next [][]string
		for _, p := range paths {
			for _, choice := range strings.Split(w, "|") {
				next = append(next, append(slices.Clone(p), choice))
			}
		}
		paths = next
	}
	return paths
}

// listsPath reports whether some path of paths starts with want.
func listsPath(paths [][]string, want []string) bool {
	for _, p := range paths {
		if len(p) >= len(want) && slices.Equal(p[:len(want)], want) {
			return true
		}
	}
	return false
}
