package main

import (
	"os"
	"path/filepath"
	"testing"
)

// jobs, status and explain take --kube; without it they still ask the
// server; NAMESPACE/NAME and --namespace name a job.
func TestKubeFlags(t *testing.T) {
	var jobs, status, explain bool
	for _, c := range clientCmds() {
		switch c.Name() {
		case "jobs", "status", "explain":
			if c.Flags().Lookup("kube") == nil || c.Flags().Lookup("kubeconfig") == nil || c.Flags().Lookup("namespace") == nil {
				t.Errorf("%s has no --kube, --kubeconfig or --namespace", c.Name())
			}
			jobs, status, explain = jobs || c.Name() == "jobs", status || c.Name() == "status", explain || c.Name() == "explain"
		}
	}
	if !jobs || !status || !explain {
		t.Fatal("a client command is missing")
	}
	k := &kubeClient{ns: "team-a"}
	if ns, n := k.job("team-b/resnet"); ns != "team-b" || n != "resnet" {
		t.Errorf("team-b/resnet: %s %s", ns, n)
	}
	if ns, n := k.job("resnet"); ns != "team-a" || n != "resnet" {
		t.Errorf("resnet with -n team-a: %s %s", ns, n)
	}
	// no --namespace: the kubeconfig context's, else default
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	conf := "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: x, user: u, namespace: team-c}\n" +
		"clusters:\n- name: x\n  cluster: {server: https://127.0.0.1:1}\nusers:\n- name: u\n  user: {token: t}\n"
	if err := os.WriteFile(kc, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if ns, _ := (&kubeClient{kubeconfig: kc}).job("resnet"); ns != "team-c" {
		t.Errorf("kubeconfig context's namespace team-c: got %s", ns)
	}
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	t.Setenv("HOME", t.TempDir())
	if ns, _ := (&kubeClient{}).job("resnet"); ns != "default" {
		t.Errorf("no namespace anywhere: %s", ns)
	}
}
