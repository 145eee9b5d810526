package main

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestDockerfile checks the trainer's image without a container engine:
// the build stage's go build, run here from the repository's root, makes
// a static binary (the final stage has no libc) that trains; the final
// stage copies it onto the PATH under the name deploy/examples/job.yaml's
// command runs; the image the Dockerfile says to tag is the one the Job
// names.
func TestDockerfile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the trainer")
	}
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var build, copyFrom, copyTo, tag string
	sc := bufio.NewScanner(strings.NewReader(string(df)))
	for sc.Scan() {
		line := sc.Text()
		if m := regexp.MustCompile(`^RUN (CGO_ENABLED=0 go build .* -o (\S+) .*)$`).FindStringSubmatch(line); m != nil {
			build, copyFrom = m[1], m[2]
		}
		if m := regexp.MustCompile(`^COPY --from=build (\S+) (\S+)$`).FindStringSubmatch(line); m != nil {
			if m[1] != copyFrom {
				t.Errorf("the final stage copies %s, the build writes %s", m[1], copyFrom)
			}
			copyTo = m[2]
		}
		if m := regexp.MustCompile(`docker build -f examples/trainer/Dockerfile -t (\S+) \.$`).FindStringSubmatch(line); m != nil {
			tag = m[1]
		}
	}
	if build == "" || copyTo == "" || tag == "" {
		t.Fatalf("Dockerfile: build %q, copy to %q, tag %q", build, copyTo, tag)
	}
	if !regexp.MustCompile(`^FROM gcr\.io/distroless/static\S*$`).Match([]byte(lastFrom(string(df)))) {
		t.Errorf("final stage %q: the test checks for a static binary, so it must be distroless/static", lastFrom(string(df)))
	}

	// the build stage's command, its output in a temporary directory
	bin := filepath.Join(t.TempDir(), "trainer")
	args := strings.Fields(strings.Replace(build, "-o "+copyFrom, "-o "+bin, 1))
	cmd := exec.Command("go", args[2:]...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), args[0])
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the trainer is dynamically linked: distroless/static has no libc to run it")
		}
	}
	f.Close()
	out, err := exec.Command(bin, "-steps", "5", "-step-time", "1ms", "-dim", "16").CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^checksum=[0-9a-f]{16} steps=5$`).Match(out) {
		t.Fatalf("the built trainer: %v\n%s", err, out)
	}

	// the Job runs it by name from the image's PATH
	var job struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Image   string   `yaml:"image"`
						Command []string `yaml:"command"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	data, err := os.ReadFile("../../deploy/examples/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &job); err != nil {
		t.Fatal(err)
	}
	c := job.Spec.Template.Spec.Containers
	if len(c) != 1 || c[0].Image != tag || len(c[0].Command) == 0 {
		t.Fatalf("deploy/examples/job.yaml: containers %+v, want the image %s", c, tag)
	}
	if dir, name := path.Split(copyTo); name != c[0].Command[0] || dir != "/usr/local/bin/" {
		t.Errorf("the image has the trainer at %s; the Job runs %q (distroless's PATH has /usr/local/bin)", copyTo, c[0].Command[0])
	}
}

// lastFrom is the Dockerfile's last FROM line: the final stage.
func lastFrom(df string) string {
	var last string
	for _, l := range strings.Split(df, "\n") {
		if strings.HasPrefix(l, "FROM ") {
			last = l
		}
	}
	return last
}
