// Package doccheck checks that the repository's Markdown says what the
// repository holds:
//
//   - every relative link in a document points to a file or directory that
//     exists, and every #anchor into a Markdown file names one of its
//     headings as GitHub slugs them (or an explicit HTML id);
//   - every `make TARGET` a document names in code is a rule of the
//     Makefile;
//   - every program in the README's command table is built from
//     gateway/cmd, every subcommand it names is one the built binary's
//     usage lists, and every flag it shows is one the binary's help prints;
//     command lines in any document's code that run one of those programs
//     are held to the same;
//   - every test, fuzz target or benchmark a document names in inline code
//     is declared in some _test.go.
//
// It reads the Markdown GitHub renders well enough for these checks
// (ATX headings, fenced and inline code, inline links and reference
// definitions), not the whole of CommonMark: setext headings and links
// whose text holds brackets are not recognised.
package doccheck
