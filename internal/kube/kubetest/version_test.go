package kubetest

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// The build number in scripts/kube-tools is the one cplane looks for, so
// that both name the same cache directory.
func TestBuildMatchesScript(t *testing.T) {
	data, err := os.ReadFile("../../../scripts/kube-tools")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^BUILD=(\S+)$`).FindSubmatch(data)
	if m == nil || string(m[1]) != cplane.ToolsBuild {
		t.Errorf("scripts/kube-tools: BUILD=%q, cplane.ToolsBuild %q", m, cplane.ToolsBuild)
	}
	if !strings.HasSuffix(cplane.BinDir(), "-build"+cplane.ToolsBuild+"/bin") && os.Getenv("GANDIVA_KUBE_BIN") == "" {
		t.Errorf("BinDir %s does not name build %s", cplane.BinDir(), cplane.ToolsBuild)
	}
}

// The API server reports its release (what `kubectl version` prints), not
// a development build's "v0.0.0-master+$Format:%H$".
func TestServerVersion(t *testing.T) {
	p := Start(t, cplane.Options{})
	v, err := Client(t, p).Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != cplane.KubeVersion || v.Major != "1" || v.Minor != "34" {
		t.Errorf("the API server reports version %q (major %q, minor %q), want %s", v.GitVersion, v.Major, v.Minor, cplane.KubeVersion)
	}
}
