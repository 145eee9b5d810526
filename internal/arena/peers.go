package arena

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// peerDir is the directory scripts/arena-peers builds scheduler name's
// release tag into: $GANDIVA_ARENA_PEERS/NAME-TAG if that is set, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/gandiva/arena-peers/NAME-TAG. The
// binaries are in its bin/, what the arena loads at run time beside them.
func peerDir(name, tag string) string {
	base := os.Getenv("GANDIVA_ARENA_PEERS")
	if base == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				home = "."
			}
			cache = filepath.Join(home, ".cache")
		}
		base = filepath.Join(cache, "gandiva", "arena-peers")
	}
	return filepath.Join(base, name+"-"+tag)
}

// missingPeer says why the peer title (built by `scripts/arena-peers
// name`) cannot run: its build of tag, in peerDir(name, tag), has no stamp
// of that tag or lacks one of bins; "" when it is complete.
func missingPeer(title, name, tag string, bins ...string) string {
	d := peerDir(name, tag)
	stamp, err := os.ReadFile(filepath.Join(d, ".stamp"))
	if err != nil || !strings.HasPrefix(string(stamp), tag+" ") {
		return fmt.Sprintf("%s %s is not built in %s (run scripts/arena-peers %s)", title, tag, d, name)
	}
	for _, b := range bins {
		if _, err := os.Stat(filepath.Join(d, "bin", b)); err != nil {
			return fmt.Sprintf("%s %s: %v (run scripts/arena-peers %s)", title, tag, err, name)
		}
	}
	return ""
}

// maxManifest bounds a manifest file the arena reads.
const maxManifest = 16 << 20

// readObjects reads the objects of a YAML (or JSON) file of one or more
// documents; empty documents are skipped.
func readObjects(file string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(b) > maxManifest {
		return nil, fmt.Errorf("%s: larger than %d bytes", file, maxManifest)
	}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		m := map[string]any{}
		if err := d.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d has no kind or no name", file, i)
		}
		out = append(out, u)
	}
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs creates the CustomResourceDefinitions of the YAML files (one
// that exists is left as it is; any other kind is an error) and waits, up
// to two minutes, until each is Established.
func installCRDs(ctx context.Context, dyn dynamic.Interface, files ...string) error {
	var names []string
	for _, file := range files {
		objs, err := readObjects(file)
		if err != nil {
			return err
		}
		for _, u := range objs {
			if u.GetKind() != "CustomResourceDefinition" {
				return fmt.Errorf("%s: a %s (%s) where only CustomResourceDefinitions were expected", file, u.GetKind(), u.GetName())
			}
			if _, err := dyn.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: creating CustomResourceDefinition %s: %w", file, u.GetName(), err)
			}
			names = append(names, u.GetName())
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, name := range names {
		for {
			got, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("CustomResourceDefinition %s: %w", name, err)
			}
			if crdEstablished(got) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CustomResourceDefinition %s not Established after 2 minutes", name)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// crdEstablished reports whether a CustomResourceDefinition's Established
// condition is True.
func crdEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
