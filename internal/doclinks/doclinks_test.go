// Package doclinks holds one test: every relative link in the repository's
// Markdown files leads somewhere. A reader who follows a link from the
// README to a guide, or from a guide to a heading of another, must land on a
// file that exists and on a heading that is there, so moving or renaming a
// file or a heading breaks the build instead of the documentation.
package doclinks

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestRelativeLinks checks every relative link of every tracked Markdown
// file outside testdata: the target file or directory exists inside the
// repository, and a #fragment names a heading of the target (GitHub's
// anchor for it). Links with a scheme (https:, mailto:) are not followed.
func TestRelativeLinks(t *testing.T) {
	root := moduleRoot(t)
	files := markdownFiles(t, root)
	if len(files) == 0 {
		t.Fatal("no Markdown files found under the module root")
	}
	anchors := map[string]map[string]bool{} // file -> its heading anchors
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		a := headingAnchors(text)
		anchors[path] = a
		return a
	}
	checked := 0
	for _, rel := range files {
		path := filepath.Join(root, rel)
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("reading %s: %v", rel, err)
		}
		for _, l := range links(text) {
			checked++
			target, frag, _ := strings.Cut(l.target, "#")
			dest := path
			if target != "" {
				dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(target))
				if r, err := filepath.Rel(root, dest); err != nil || strings.HasPrefix(r, "..") {
					t.Errorf("%s:%d: link %q leaves the repository", rel, l.line, l.target)
					continue
				}
				info, err := os.Stat(dest)
				if err != nil {
					t.Errorf("%s:%d: link %q: no such file", rel, l.line, l.target)
					continue
				}
				if info.IsDir() {
					if frag != "" {
						t.Errorf("%s:%d: link %q: a directory has no headings", rel, l.line, l.target)
					}
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !anchorsOf(dest)[strings.ToLower(frag)] {
				t.Errorf("%s:%d: link %q: no heading with anchor #%s in %s", rel, l.line, l.target, frag, filepath.Base(dest))
			}
		}
	}
	t.Logf("%d relative links in %d Markdown files", checked, len(files))
}

// moduleRoot is the directory holding go.mod, above this package's.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// markdownFiles lists the Markdown files git tracks, relative to root,
// outside testdata. Without git (a tarball of the source) it walks the tree
// instead, skipping hidden directories and testdata.
func markdownFiles(t *testing.T, root string) []string {
	var files []string
	cmd := exec.Command("git", "ls-files", "-z", "--", "*.md")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" && !inTestdata(f) {
				files = append(files, filepath.FromSlash(f))
			}
		}
		return files
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			rel, _ := filepath.Rel(root, path)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func inTestdata(slashPath string) bool {
	for _, part := range strings.Split(slashPath, "/") {
		if part == "testdata" {
			return true
		}
	}
	return false
}

type link struct {
	target string
	line   int
}

var (
	// inlineLink matches [text](target) and [text](target "title"), images
	// included; the text may hold one level of brackets ([`x`][y] is rare
	// enough not to matter here).
	inlineLink = regexp.MustCompile(`\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// refDefinition matches a reference-style definition: [label]: target.
	refDefinition = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	codeSpan      = regexp.MustCompile("`+[^`]*`+")
	scheme        = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// links returns the relative link targets of a Markdown text, outside
// fenced code blocks and code spans.
func links(text []byte) []link {
	var out []link
	forEachProseLine(text, func(n int, line string) {
		line = codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refDefinition.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, tg := range targets {
			if tg == "" || scheme.MatchString(tg) || strings.HasPrefix(tg, "//") {
				continue
			}
			out = append(out, link{target: tg, line: n})
		}
	})
	return out
}

// forEachProseLine calls fn for each line outside fenced code blocks, with
// its 1-based number.
func forEachProseLine(text []byte, fn func(n int, line string)) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	fence := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		fn(n, line)
	}
}

var (
	atxHeading = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	mdLinkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// headingAnchors returns the anchors GitHub gives the ATX headings of a
// Markdown text: the heading's text as rendered, lower-cased, with
// punctuation removed and spaces turned into hyphens; a repeated anchor
// gets -1, -2, ... in order.
func headingAnchors(text []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	forEachProseLine(text, func(_ int, line string) {
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		anchor := slug(m[2])
		if k := seen[anchor]; k > 0 {
			seen[anchor] = k + 1
			anchor = fmt.Sprintf("%s-%d", anchor, k)
		} else {
			seen[anchor] = 1
		}
		anchors[anchor] = true
	})
	return anchors
}

// slug is GitHub's anchor for a heading's Markdown text: markup (code
// spans' backticks, emphasis, link targets) is dropped, letters are
// lower-cased, letters, digits, '-' and '_' are kept, a space becomes '-',
// and every other character is removed.
func slug(heading string) string {
	heading = mdLinkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == '`' || r == '*':
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestSlug holds slug to anchors GitHub gives headings of this repository.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Measured: global vs cuckoo in kvdemo":              "measured-global-vs-cuckoo-in-kvdemo",
		"One filter for the whole store: `dynamic.Index`":   "one-filter-for-the-whole-store-dynamicindex",
		"Faults: what the store promises":                   "faults-what-the-store-promises",
		"Names and `Options.Filters`":                       "names-and-optionsfilters",
		"Version 3: quotient lines":                         "version-3-quotient-lines",
		"From key to line, quotient, remainder (version 3)": "from-key-to-line-quotient-remainder-version-3",
		"`kvdemo check DIR`":                                "kvdemo-check-dir",
		"A [linked](https://example.com) heading":           "a-linked-heading",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
	a := headingAnchors([]byte("# Results\n\n```\n# not a heading\n```\n## Results\n### Results\n"))
	for _, want := range []string{"results", "results-1", "results-2"} {
		if !a[want] {
			t.Errorf("headingAnchors: no %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("headingAnchors took a line inside a code fence for a heading")
	}
}

// TestLinksParsing holds links to the Markdown it must read and skip.
func TestLinksParsing(t *testing.T) {
	text := "See [a](docs/a.md#x), ![img](p.svg \"t\") and [web](https://x.org).\n" +
		"`[not](a-link.md)` and\n```\n[not](fenced.md)\n```\n[ref]: docs/b.md\n" +
		"[`code` text](docs/c.md) [a [nested] one](docs/d.md)\n"
	var got []string
	for _, l := range links([]byte(text)) {
		got = append(got, l.target)
	}
	want := []string{"docs/a.md#x", "p.svg", "docs/b.md", "docs/c.md", "docs/d.md"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("links = %q, want %q", got, want)
	}
}
