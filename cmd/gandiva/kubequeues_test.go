package main

import (
	"bytes"
	"strings"
	"testing"
)

// gandiva kube queues --from-configmap - reads the ConfigMap from the
// standard input and prints the queues; keys other than tickets.* are
// named on the standard error; a file that is not a ConfigMap, or bad
// tickets, is an error naming it.
func TestKubeQueuesFromConfigMap(t *testing.T) {
	run := func(in string, args ...string) (string, string, error) {
		cmd := newKubeQueuesCmd()
		var out, errOut bytes.Buffer
		cmd.SetIn(strings.NewReader(in))
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), errOut.String(), err
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gandiva-settings}\ndata:\n  tickets.team-a: \"4\"\n  other.x: \"1\"\n"
	out, errOut, err := run(cm, "--from-configmap", "-")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: GandivaQueue", "name: team-a", "tickets: 4", "namespaces: [team-a]"} {
		if !strings.Contains(out, want) {
			t.Errorf("output without %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "parent:") || !strings.Contains(errOut, `key "other.x"`) {
		t.Errorf("output:\n%s\nstandard error:\n%s", out, errOut)
	}
	if out, _, err := run(cm, "--from-configmap", "-", "--parent", "org"); err != nil || !strings.Contains(out, "name: org") || !strings.Contains(out, "parent: org") {
		t.Errorf("--parent org: %v\n%s", err, out)
	}
	for in, want := range map[string]string{
		"apiVersion: v1\nkind: Secret\n":            `a "Secret", not a ConfigMap`,
		"data:\n  tickets.team-a: \"4\"\n":          "no kind: want a ConfigMap",
		"kind: ConfigMap\ndata: {other.x: \"1\"}\n": "no tickets.NAMESPACE keys",
		strings.Replace(cm, `"4"`, `"-4"`, 1):       `tickets "-4"`,
		"{":                                         "--from-configmap -",
	} {
		if _, _, err := run(in, "--from-configmap", "-"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}
