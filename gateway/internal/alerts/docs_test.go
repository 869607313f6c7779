package alerts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The receiver-side verification docs/POLICY.md shows compiles and accepts
// what Sign produces, and refuses a changed body.
func TestDocsVerifySnippet(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "POLICY.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "```go\n// VerifyTollgate")
	if start < 0 {
		t.Fatal("docs/POLICY.md has no VerifyTollgate snippet")
	}
	snippet := text[start+len("```go\n"):]
	snippet = snippet[:strings.Index(snippet, "```")]

	body := FromCrossing(crossings(1, 80, time.Now())[0]).Body()
	header := Sign(testSecret, body, time.Now())
	prog := `package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

` + snippet + `
func main() {
	secret, header, body := []byte(` + strconv.Quote(string(testSecret)) + `), ` + strconv.Quote(header) + `, []byte(` + strconv.Quote(string(body)) + `)
	good := VerifyTollgate(secret, header, body, time.Now())
	bad := VerifyTollgate(secret, header, append(body, ' '), time.Now())
	late := VerifyTollgate(secret, header, body, time.Now().Add(time.Hour))
	fmt.Println(good == nil, bad != nil, late != nil)
	if good != nil || bad == nil || late == nil {
		os.Exit(1)
	}
}
`
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "run", file)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GO111MODULE=off")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "true true true" {
		t.Fatalf("the snippet: %v\n%s", err, out)
	}
}
