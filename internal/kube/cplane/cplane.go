package cplane

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The versions scripts/kube-tools builds (a test checks that the script says the same).
const (
	KubeVersion = "v1.34.4"
	EtcdVersion = "v3.6.16"
	KwokVersion = "v0.8.0"
	// ToolsBuild counts changes to how scripts/kube-tools builds them (its
	// BUILD): build 2 sets the Kubernetes binaries' version (/version,
	// `kubectl version`) to KubeVersion. A new build is a new directory.
	ToolsBuild = "2"
)

// BuildCommand is the command, run from the repository root, that builds the binaries.
const BuildCommand = "scripts/kube-tools"

// Binaries are the programs BinDir must hold.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controllers", "kube-scheduler", "kwok"}

// ErrNoBinaries is wrapped by Start and Check when a binary is missing.
var ErrNoBinaries = errors.New("the local control plane's binaries are missing")

// stages are kwok's stage files: node and pod life cycles (kwok ships none
// built in). See stages.yaml.
//
//go:embed stages.yaml
var stages []byte

// Versions names the set of versions and the build, as the cache
// directory does: "v1.34.4-etcd3.6.16-kwok0.8.0-build2".
func Versions() string {
	return KubeVersion + "-etcd" + strings.TrimPrefix(EtcdVersion, "v") + "-kwok" + strings.TrimPrefix(KwokVersion, "v") + "-build" + ToolsBuild
}

// BinDir is where scripts/kube-tools puts the binaries: $GANDIVA_KUBE_BIN if
// set, else ${XDG_CACHE_HOME:-$HOME/.cache}/gandiva/kube/VERSIONS/bin.
func BinDir() string {
	if d := os.Getenv("GANDIVA_KUBE_BIN"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "gandiva", "kube", Versions(), "bin")
}

// Check reports whether dir holds every binary; the error wraps ErrNoBinaries
// and names the missing ones and the command that builds them.
func Check(dir string) error {
	var missing []string
	for _, b := range Binaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s not in %s; build them once with `%s` (about 20 minutes on 2 cores, then cached)",
			ErrNoBinaries, strings.Join(missing, ", "), dir, BuildCommand)
	}
	return nil
}

// User is an identity the API server accepts a token for.
type User struct {
	Name   string
	Groups []string
}

// Options configure Start.
type Options struct {
	// BinDir holds the binaries ("" = BinDir()).
	BinDir string
	// Controllers runs kube-controllers: the Job controller (which creates,
	// deletes and recreates a Job's pods) and the pod garbage collector.
	Controllers bool
	// PodGCQuarantine is how long podgc waits before deleting the pods of a
	// node that disappeared (0: 2 s; a real cluster waits 40 s).
	PodGCQuarantine time.Duration
	// Kwok runs kwok, which makes nodes annotated kwok.x-k8s.io/node=fake
	// Ready and their pods Running (see stages.yaml).
	Kwok bool
	// Users get tokens (Plane.UserConfig) and no rights until bound some.
	Users []User
	// Dir is where the temporary directory goes ("" = os.TempDir()).
	Dir string
}

// Plane is a running control plane.
type Plane struct {
	// Dir holds the certificates, token file, kubeconfig and logs.
	Dir string
	// URL is the API server's address, https://127.0.0.1:PORT.
	URL string
	// CA is the PEM certificate that signed the API server's.
	CA []byte
	// Kubeconfig is a kubeconfig file for the admin.
	Kubeconfig string

	adminToken string
	tokens     map[string]string
	etcdDir    string
	etcdURL    string

	mu    sync.Mutex
	procs []*proc
	stop  sync.Once
}

// Start brings a control plane up; it returns once the API server is ready
// (and its bootstrap RBAC roles exist). On an error nothing is left behind.
func Start(ctx context.Context, o Options) (*Plane, error) {
	if o.BinDir == "" {
		o.BinDir = BinDir()
	}
	if err := Check(o.BinDir); err != nil {
		return nil, err
	}
	var err error
	for try := 0; try < 3; try++ {
		var p *Plane
		p, err = start(ctx, o)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

var errPortTaken = errors.New("port taken")

func start(ctx context.Context, o Options) (p *Plane, err error) {
	dir, err := os.MkdirTemp(o.Dir, "gandiva-kube-")
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	p = &Plane{Dir: dir, tokens: map[string]string{}}
	defer func() {
		if err != nil {
			p.Stop()
		}
	}()
	shm := "/dev/shm"
	if fi, e := os.Stat(shm); e != nil || !fi.IsDir() {
		shm = dir
	}
	if p.etcdDir, err = os.MkdirTemp(shm, "gandiva-etcd-"); err != nil {
		return p, fmt.Errorf("control plane: etcd data directory: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return p, err
	}
	if err := p.writeFiles(o.Users); err != nil {
		return p, err
	}

	// etcd
	p.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	if _, err := p.run(o.BinDir, "etcd",
		"--name=default", "--data-dir="+p.etcdDir,
		"--listen-client-urls="+p.etcdURL, "--advertise-client-urls="+p.etcdURL,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=default="+peer, "--unsafe-no-fsync", "--log-level=warn",
		"--quota-backend-bytes=4294967296"); err != nil {
		return p, err
	}
	if err := p.waitHTTP(ctx, "etcd", p.etcdURL+"/health", nil, ""); err != nil {
		return p, err
	}

	// kube-apiserver
	p.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	if _, err := p.run(o.BinDir, "kube-apiserver",
		"--etcd-servers="+p.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports[2]),
		"--tls-cert-file="+filepath.Join(dir, "apiserver.crt"),
		"--tls-private-key-file="+filepath.Join(dir, "apiserver.key"),
		"--cert-dir="+dir,
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--anonymous-auth=false",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		"--enable-priority-and-fairness=false",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--event-ttl=1h",
	); err != nil {
		return p, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CA)
	if err := p.waitHTTP(ctx, "kube-apiserver", p.URL+"/readyz", pool, p.adminToken); err != nil {
		return p, err
	}
	if err := p.writeKubeconfig(p.Kubeconfig, "admin", p.adminToken); err != nil {
		return p, err
	}
	if o.Controllers {
		q := o.PodGCQuarantine
		if q <= 0 {
			q = 2 * time.Second
		}
		if _, err := p.run(o.BinDir, "kube-controllers", "--kubeconfig="+p.Kubeconfig,
			"--controllers=job,podgc", "--podgc-period=1s", "--podgc-quarantine="+q.String()); err != nil {
			return p, err
		}
	}
	if o.Kwok {
		if _, err := p.run(o.BinDir, "kwok", "--kubeconfig="+p.Kubeconfig,
			"--config="+filepath.Join(dir, "stages.yaml"),
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--cidr=10.244.0.1/16", "--node-ip=127.0.0.1"); err != nil {
			return p, err
		}
	}
	return p, nil
}

// writeFiles writes the certificates, keys, token file and stage file.
func (p *Plane) writeFiles(users []User) error {
	ca, cert, key, saKey, err := makeCerts()
	if err != nil {
		return fmt.Errorf("control plane: certificates: %w", err)
	}
	p.CA = ca
	p.adminToken = token()
	var b strings.Builder
	fmt.Fprintf(&b, "%s,admin,admin,\"system:masters\"\n", p.adminToken)
	for i, u := range users {
		if u.Name == "" || u.Name == "admin" || strings.ContainsAny(u.Name, ",\"\n") {
			return fmt.Errorf("control plane: user %d: bad name %q", i, u.Name)
		}
		t := token()
		p.tokens[u.Name] = t
		fmt.Fprintf(&b, "%s,%s,%s,\"%s\"\n", t, u.Name, u.Name, strings.Join(u.Groups, ","))
	}
	p.Kubeconfig = filepath.Join(p.Dir, "admin.kubeconfig")
	files := map[string][]byte{
		"ca.crt": ca, "apiserver.crt": cert, "apiserver.key": key, "sa.key": saKey,
		"tokens.csv": []byte(b.String()), "stages.yaml": stages,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(p.Dir, name), data, 0o600); err != nil {
			return fmt.Errorf("control plane: %w", err)
		}
	}
	return nil
}

func token() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Config is a rest.Config for the admin (group system:masters). Its rate
// limits are high: the tests drive the API server hard.
func (p *Plane) Config() *rest.Config { return p.config(p.adminToken) }

// UserConfig is a rest.Config for a user of Options.Users; nil if unknown.
func (p *Plane) UserConfig(name string) *rest.Config {
	t, ok := p.tokens[name]
	if !ok {
		return nil
	}
	return p.config(t)
}

func (p *Plane) config(tok string) *rest.Config {
	return &rest.Config{
		Host:            p.URL,
		BearerToken:     tok,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.CA},
		QPS:             2000,
		Burst:           4000,
	}
}

// WriteKubeconfig writes a kubeconfig file for a user of Options.Users, or
// for the admin when user is "admin".
func (p *Plane) WriteKubeconfig(path, user string) error {
	tok := p.adminToken
	if user != "admin" {
		var ok bool
		if tok, ok = p.tokens[user]; !ok {
			return fmt.Errorf("kubeconfig: no user %q", user)
		}
	}
	return p.writeKubeconfig(path, user, tok)
}

func (p *Plane) writeKubeconfig(path, user, tok string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: p.URL, CertificateAuthorityData: p.CA}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tok}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
	cfg.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// proc is one process of the plane.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// run starts a binary of dir with its output in Dir/NAME.log.
func (p *Plane) run(dir, name string, args ...string) (*proc, error) {
	return p.Run(filepath.Join(dir, name), name, args...)
}

// Run starts a process that belongs to the plane (kube-scheduler for a
// benchmark, say): it logs to Dir/NAME.log, dies with this process and is
// stopped by Stop or StopProcess.
func (p *Plane) Run(path, name string, args ...string) (*proc, error) {
	logPath := filepath.Join(p.Dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	defer f.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("control plane: starting %s: %w", name, err)
	}
	pr := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		close(pr.done)
	}()
	p.mu.Lock()
	p.procs = append(p.procs, pr)
	p.mu.Unlock()
	return pr, nil
}

// StopProcess kills the named process of the plane and waits for it.
func (p *Plane) StopProcess(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, pr := range p.procs {
		if pr.name == name {
			pr.kill()
			p.procs = slices.Delete(p.procs, i, i+1)
			return nil
		}
	}
	return fmt.Errorf("control plane: no process %q", name)
}

func (pr *proc) kill() {
	select {
	case <-pr.done:
		return
	default:
	}
	// the whole process group: etcd and the API server start no children,
	// but a wrapper script would
	syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
	pr.cmd.Process.Kill()
	<-pr.done
}

// waitHTTP polls url until it answers 200, the process exits, or ctx ends.
func (p *Plane) waitHTTP(ctx context.Context, name, url string, pool *x509.CertPool, tok string) error {
	p.mu.Lock()
	var pr *proc
	for _, x := range p.procs {
		if x.name == name {
			pr = x
		}
	}
	p.mu.Unlock()
	cl := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer cl.CloseIdleConnections()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := cl.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		last = err
		select {
		case <-pr.done:
			tail := Tail(pr.log, 20)
			if strings.Contains(tail, "address already in use") {
				return fmt.Errorf("control plane: %s: %w:\n%s", name, errPortTaken, tail)
			}
			return fmt.Errorf("control plane: %s exited (%v) before it was ready:\n%s", name, pr.err, tail)
		case <-ctx.Done():
			return fmt.Errorf("control plane: waiting for %s: %w (last: %v)\n%s", name, ctx.Err(), last, Tail(pr.log, 20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Logs returns the last n lines of every process's log, for a failed test.
func (p *Plane) Logs(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, pr := range p.procs {
		fmt.Fprintf(&b, "==> %s <==\n%s\n", pr.name, Tail(pr.log, n))
	}
	return b.String()
}

// Tail returns the last n lines of a file (a process's log), or the
// error that kept it from being read, for a failure message.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop kills every process (last started first) and removes every file
// Start made. It is safe to call more than once.
func (p *Plane) Stop() {
	p.stop.Do(func() {
		p.mu.Lock()
		procs := slices.Clone(p.procs)
		p.procs = nil
		p.mu.Unlock()
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].kill()
		}
		if p.etcdDir != "" {
			os.RemoveAll(p.etcdDir)
		}
		if p.Dir != "" {
			os.RemoveAll(p.Dir)
		}
	})
}

// freePorts returns n distinct ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("control plane: finding a free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
