package doccheck_test

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// prose returns the lines of a Markdown file outside its fenced blocks.
func prose(src string) []string {
	var out []string
	fenced := false
	for _, l := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, l)
		}
	}
	return out
}

// anchors returns the anchors GitHub gives the headings of a Markdown file: lower
// case, punctuation dropped, spaces as hyphens, and -1, -2… on repeats.
func anchors(src string) map[string]bool {
	out := map[string]bool{}
	for _, l := range prose(src) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#"))) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		for n := 1; out[a]; n++ {
			a = b.String() + "-" + strconv.Itoa(n)
		}
		out[a] = true
	}
	return out
}

// TestLinks: every relative link in the README, the guides and the CHANGELOG names a
// file of the repository, and every #anchor a heading of its Markdown file, so that
// moving a section leaves no link behind.
func TestLinks(t *testing.T) {
	files := append(markdown(t), "CHANGELOG.md")
	checked := 0
	for _, md := range files {
		src, err := os.ReadFile(filepath.Join(root, md))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range prose(string(src)) {
			for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(l, "x"), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				if file == "" {
					file = md
				} else {
					file = path.Join(path.Dir(md), file)
				}
				checked++
				data, err := os.ReadFile(filepath.Join(root, file))
				if err != nil {
					if info, serr := os.Stat(filepath.Join(root, file)); serr == nil && info.IsDir() && anchor == "" {
						continue
					}
					t.Errorf("%s: link %q: no file %s", md, target, file)
					continue
				}
				if anchor != "" && strings.HasSuffix(file, ".md") && !anchors(string(data))[anchor] {
					t.Errorf("%s: link %q: %s has no heading #%s", md, target, file, anchor)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d links; want the README's and the guides'", checked)
	}
}
