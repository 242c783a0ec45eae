package prom

import (
	"os"
	"os/exec"
	"testing"
)

// tool returns the path of the Prometheus tool name (prometheus, promtool).
// Without it the test is skipped with the command that installs it, except
// under CI (CI set), where it fails: CI must run these tests
// (scripts/test.sh installs the Debian package when it is missing).
func tool(t *testing.T, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		pkg := "prometheus"
		if name == "amtool" || name == "prometheus-alertmanager" {
			pkg = "prometheus-alertmanager"
		}
		hint := name + " not found; install it with: apt-get install " + pkg
		if os.Getenv("CI") != "" {
			t.Fatal(hint)
		}
		t.Skip(hint)
	}
	return bin
}
