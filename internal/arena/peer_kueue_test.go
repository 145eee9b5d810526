package arena

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/trace"
)

// A small arena under Kueue: 20 synthetic jobs of 1 to 4 GPUs from 3
// users on 2 servers of 4 GPUs at 150× speed. Kueue's webhook must create
// the Jobs suspended (startKueue checks it before the clock starts), so
// every job that finishes was admitted by Kueue; the JSON has the kueue
// row, every job completed, none sooner than its work allows, and Kueue's
// and kube-scheduler's usage. Skipped when Kueue is not built
// (scripts/arena-peers kueue).
func TestKueueArena(t *testing.T) {
	needPeer(t, "kueue", kueueMissing)
	a := playArena(t, trace.SynthConfig{Jobs: 20, Seed: 1, Users: 3, Load: 8, GPUs: []int{1, 1, 2, 4}, MaxDuration: 1200},
		"kueue", Config{Speed: 150, Checkpoints: Checkpoints{Every: 300, OnTerm: true}, Timeout: 4 * time.Minute}, 10*time.Minute)
	doc := a.report(t)
	a.checkRows(t, doc.Results, "kueue")
	if doc.Results[0].Sim != nil {
		t.Errorf("kueue's row has simulator figures")
	}
}

// A peer whose build is missing gets a "not run: WHY" row and no plane.
func TestPeerNotBuilt(t *testing.T) {
	checkNotBuilt(t, "kueue", trace.SynthConfig{Jobs: 2, Seed: 1, Users: 1, Load: 1, GPUs: []int{1}, MaxDuration: 100})
}

func TestParseKueue(t *testing.T) {
	s, err := ParseSchedulers("kueue, kube-scheduler")
	if err != nil || len(s) != 2 || s[0].Kind != "kueue" || s[0].String() != "kueue" || s[0].schedulerName() != "default-scheduler" {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{"kueue:fair", "kueue@fifo"} {
		if _, err := ParseSchedulers(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// Kueue's waitForPodsReady times are its documented ones in trace time,
// divided by the speed, with floors.
func TestKueueWait(t *testing.T) {
	for _, c := range []struct {
		speed                 float64
		to, rec, base, maxOff int
	}{
		{1, 600, 180, 60, 3600},
		{20, 30, 15, 3, 180},
		{150, 15, 15, 1, 24},
		{1e6, 15, 15, 1, 1},
	} {
		to, rec, base, maxOff := kueueWait(c.speed)
		if to != c.to || rec != c.rec || base != c.base || maxOff != c.maxOff {
			t.Errorf("speed %v: %d %d %d %d, want %d %d %d %d", c.speed, to, rec, base, maxOff, c.to, c.rec, c.base, c.maxOff)
		}
	}
}

// kueueCRDs gives exactly the five converted kinds a conversion webhook
// at 127.0.0.1.
func TestKueueCRDs(t *testing.T) {
	dir := t.TempDir()
	crd := func(name string) string {
		return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: " + name + "\nspec:\n  group: kueue.x-k8s.io\n"
	}
	os.WriteFile(dir+"/a.yaml", []byte(crd("workloads.kueue.x-k8s.io")+"---\n"+crd("resourceflavors.kueue.x-k8s.io")), 0o600)
	os.WriteFile(dir+"/b.yaml", []byte(crd("clusterqueues.kueue.x-k8s.io")), 0o600)
	b, err := kueueCRDs(dir, 4321, []byte("CA"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "---\n")[1:]
	if len(docs) != 3 {
		t.Fatalf("%d documents:\n%s", len(docs), b)
	}
	for i, want := range []bool{true, false, true} {
		got := strings.Contains(docs[i], "url: https://127.0.0.1:4321/convert") && strings.Contains(docs[i], "strategy: Webhook") &&
			strings.Contains(docs[i], "caBundle: Q0E=")
		if got != want {
			t.Errorf("document %d: conversion %v, want %v:\n%s", i, got, want, docs[i])
		}
	}
}
