package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// digestRef is IMAGE[:TAG]@sha256:<64 hex>.
var digestRef = regexp.MustCompile(`^[a-z0-9./_-]+(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$`)

// TestDockerfilePinsBaseImages: every FROM names a digest (a tag alone
// moves under a rebuild: issue 30), keeps its tag in a comment above it
// and says how to refresh it.
func TestDockerfilePinsBaseImages(t *testing.T) {
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(df), "crane digest ") {
		t.Error("Dockerfile does not say how to refresh its digests (crane digest IMAGE)")
	}
	lines := strings.Split(string(df), "\n")
	froms := 0
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "FROM" {
			continue
		}
		froms++
		ref := f[1]
		if !digestRef.MatchString(ref) {
			t.Errorf("Dockerfile:%d: FROM %s is not pinned by digest (IMAGE:TAG@sha256:...)", i+1, ref)
			continue
		}
		tagged := strings.SplitN(ref, "@", 2)[0]
		if i == 0 || !strings.Contains(lines[i-1], tagged) || !strings.HasPrefix(lines[i-1], "#") {
			t.Errorf("Dockerfile:%d: no comment above FROM naming its tag %s", i+1, tagged)
		}
		if strings.HasSuffix(tagged, ":latest") {
			t.Errorf("Dockerfile:%d: %s", i+1, ref)
		}
	}
	if froms < 2 {
		t.Fatalf("Dockerfile has %d FROM lines, want the build and the runtime stage", froms)
	}
}

// imageLine is a manifest's image: value (comments aside).
var imageLine = regexp.MustCompile(`(?m)^\s*-?\s*image:\s*["']?([^\s"'#]+)`)

// TestManifestsNeverUseLatest: a Kubernetes image is a version tag or a
// digest, never :latest nor a bare name (which means :latest).
func TestManifestsNeverUseLatest(t *testing.T) {
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/kubernetes")
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range imageLine.FindAllStringSubmatch(string(data), -1) {
			n++
			img := m[1]
			name := img
			if i := strings.LastIndex(img, "/"); i >= 0 {
				name = img[i+1:]
			}
			switch {
			case strings.Contains(img, "@sha256:"):
			case !strings.Contains(name, ":"):
				t.Errorf("%s: image %s has no tag: that is :latest", f, img)
			case strings.HasSuffix(name, ":latest"):
				t.Errorf("%s: image %s", f, img)
			}
		}
	}
	if n == 0 {
		t.Fatal("no image: lines found in deploy/kubernetes")
	}
}
