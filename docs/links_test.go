package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// markdownLink is a link's target in [text](target); images too.
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestEveryRelativeLinkInTheDocsResolves follows every link of README.md
// and docs/ that is not a URL: the file must exist, and a #fragment must
// name a heading of the Markdown file it points into. The README was split
// into docs/ pages; a page moved or a heading renamed breaks links that
// nobody clicks until a user does.
func TestEveryRelativeLinkInTheDocsResolves(t *testing.T) {
	pages := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range markdownLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(outsideCode(string(text)), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, fragment, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), file)
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s links to %s, which does not exist", rel(page), target)
				continue
			}
			if fragment != "" && !hasHeading(t, dest, fragment) {
				t.Errorf("%s links to %s, but %s has no heading #%s", rel(page), target, rel(dest), fragment)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d relative links found: is the pattern still right?", checked)
	}
}

// codeSpan is inline code, where ](x) is a regular expression or CEL
// (docs/api.md's validation patterns); headings keep theirs for anchors.
var codeSpan = regexp.MustCompile("``[^`]+``|`[^`\n]+`")

// outsideCode blanks fenced code blocks, where ](x) is shell or YAML.
func outsideCode(text string) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			b.WriteString("\n")
			continue
		}
		if fenced {
			b.WriteString("\n")
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// hasHeading tells whether a Markdown file has a heading whose GitHub
// anchor is fragment (lower case, punctuation dropped, spaces as hyphens).
func hasHeading(t *testing.T, path, fragment string) bool {
	t.Helper()
	if !strings.HasSuffix(path, ".md") {
		return false
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(outsideCode(string(text)), "\n") {
		heading := strings.TrimLeft(line, "#")
		if heading == line || !strings.HasPrefix(heading, " ") {
			continue
		}
		if anchor(heading) == fragment {
			return true
		}
	}
	return false
}

var notInAnchor = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)

func anchor(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = notInAnchor.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return r
}
