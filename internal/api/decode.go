package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gandiva-sched/gandiva/internal/visible"
)

// MaxBody bounds every request body.
const MaxBody = 1 << 20

// Limits on a job request.
const (
	MaxJobGPUs    = 4096
	maxArgs       = 512
	maxArgBytes   = 64 << 10
	maxEnv        = 256
	maxLabel      = 128
	maxPriority   = 1000
	maxCheckpoint = 86400.0
)

// Decode reads one JSON value of type T from data, strictly: unknown
// fields (and fields of the wrong case), duplicate keys, strings that are
// not UTF-8 (or hold lone surrogate escapes), trailing data, wrong types
// and bad syntax are 400 errors that name the field. It never panics, whatever the input (FuzzDecode).
func Decode[T any](data []byte) (*T, error) {
	if len(data) > MaxBody {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: fmt.Sprintf("body: larger than %d bytes", MaxBody)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, Invalid("body", "empty; want a JSON object")
	}
	if err := checkJSON(data, reflect.TypeFor[T]()); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	v := new(T)
	if err := dec.Decode(v); err != nil {
		return nil, jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, Invalid("body", "more than one JSON value")
	}
	return v, nil
}

// ReadBody reads a request body of at most MaxBody bytes.
func ReadBody(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return nil, Invalid("body", "could not be read: %v", err)
	}
	if len(data) > MaxBody {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: fmt.Sprintf("body: larger than %d bytes", MaxBody)}
	}
	return data, nil
}

var unknownFieldRE = regexp.MustCompile(`^json: unknown field "(.*)"$`)

func jsonError(err error) *Error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return Invalid("body", "malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return Invalid(field, "want %s, got JSON %s", goType(te.Type.String()), te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Invalid("body", "truncated JSON")
	}
	if m := unknownFieldRE.FindStringSubmatch(err.Error()); m != nil {
		if m[1] == "user" {
			return Invalid("user", "not accepted: a job is charged to the user of the token that submits it")
		}
		if m[1] == "" {
			return Invalid("body", "unknown field \"\"")
		}
		return Invalid(m[1], "unknown field")
	}
	return Invalid("body", "%v", err)
}

func goType(t string) string {
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map"):
		return "an object"
	}
	return t
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks a job request and names the first bad field. It also
// fills defaults that do not depend on the server (the name).
func (r *JobRequest) Validate() error {
	switch {
	case len(r.Command) == 0:
		return Invalid("command", "required: the program and its arguments")
	case r.Command[0] == "":
		return Invalid("command[0]", "empty program name")
	case len(r.Command) > maxArgs:
		return Invalid("command", "%d arguments; at most %d", len(r.Command), maxArgs)
	}
	for i, a := range r.Command {
		if len(a) > maxArgBytes || strings.ContainsRune(a, 0) || !utf8.ValidString(a) {
			return Invalid(fmt.Sprintf("command[%d]", i), "must be valid UTF-8 without NUL, at most %d bytes", maxArgBytes)
		}
	}
	if err := label("name", r.Name); err != nil {
		return err
	}
	if err := idempotencyKey("idempotency_key", r.IdempotencyKey); err != nil {
		return err
	}
	if err := label("group", r.Group); err != nil {
		return err
	}
	switch {
	case r.GPUs <= 0 || r.GPUs > MaxJobGPUs:
		return Invalid("gpus", "must be 1 to %d, got %d", MaxJobGPUs, r.GPUs)
	case r.MinGPUs < 0 || r.MinGPUs > MaxJobGPUs:
		return Invalid("min_gpus", "must be 0 to %d, got %d", MaxJobGPUs, r.MinGPUs)
	case r.MaxGPUs < 0 || r.MaxGPUs > MaxJobGPUs:
		return Invalid("max_gpus", "must be 0 to %d, got %d", MaxJobGPUs, r.MaxGPUs)
	case r.MinGPUs > 0 && r.MinGPUs > r.GPUs:
		return Invalid("min_gpus", "%d is more than gpus=%d", r.MinGPUs, r.GPUs)
	case r.MaxGPUs > 0 && r.MaxGPUs < r.GPUs:
		return Invalid("max_gpus", "%d is less than gpus=%d", r.MaxGPUs, r.GPUs)
	case badNum(r.MemGiB) || r.MemGiB < 0 || r.MemGiB > 4096:
		return Invalid("mem_gib", "must be a number from 0 to 4096, got %v", r.MemGiB)
	case badNum(r.Iters) || r.Iters < 0 || r.Iters > 1e15:
		return Invalid("iters", "must be a number from 0 to 1e15, got %v", r.Iters)
	case badNum(r.IterTime) || r.IterTime < 0 || r.IterTime > 86400:
		return Invalid("iter_time", "must be a number of seconds from 0 to 86400, got %v", r.IterTime)
	case r.Priority < -maxPriority || r.Priority > maxPriority:
		return Invalid("priority", "must be from %d to %d, got %d", -maxPriority, maxPriority, r.Priority)
	case r.CheckpointEvery != nil && (badNum(*r.CheckpointEvery) || *r.CheckpointEvery < 0 || *r.CheckpointEvery > maxCheckpoint):
		return Invalid("checkpoint_every", "must be a number of seconds from 0 to %v, got %v", maxCheckpoint, *r.CheckpointEvery)
	}
	if r.WorkDir != "" {
		if !filepath.IsAbs(r.WorkDir) || strings.ContainsRune(r.WorkDir, 0) || len(r.WorkDir) > 4096 || !utf8.ValidString(r.WorkDir) {
			return Invalid("workdir", "must be an absolute path, got %q", r.WorkDir)
		}
		r.WorkDir = filepath.Clean(r.WorkDir)
	}
	if len(r.Env) > maxEnv {
		return Invalid("env", "%d variables; at most %d", len(r.Env), maxEnv)
	}
	for k, v := range r.Env {
		switch {
		case !envNameRE.MatchString(k) || len(k) > 256:
			return Invalid("env", "bad variable name %q", k)
		case strings.HasPrefix(k, "GANDIVA_") || k == "CUDA_VISIBLE_DEVICES":
			return Invalid("env."+k, "set by the agent; a job may not set it")
		case len(v) > maxArgBytes || strings.ContainsRune(v, 0) || !utf8.ValidString(v):
			return Invalid("env."+k, "value must be valid UTF-8 without NUL, at most %d bytes", maxArgBytes)
		}
	}
	if r.Name == "" {
		r.Name = filepath.Base(r.Command[0])
		if len(r.Name) > maxLabel {
			r.Name = r.Name[:maxLabel]
		}
		if label("name", r.Name) != nil {
			r.Name = "job"
		}
	}
	return nil
}

// label checks a name people choose and others read (a job's name or
// group, an agent token's label): at most maxLabel bytes of UTF-8 without
// control, bidirectional or other invisible format characters
// (visible.Hidden), which would rewrite a terminal that lists it or reorder
// the text around it.
func label(field, s string) error {
	return nodeText(field, s, maxLabel)
}

func badNum(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }

var nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

// validNodeName checks a node name: 1 to 253 of letters, digits, '.', '_'
// and '-', starting with a letter or digit (a host name fits).
func validNodeName(name string) error {
	if !nodeNameRE.MatchString(name) {
		return Invalid("name", "must be a node name of letters, digits, '.', '_' and '-' (at most 253), got %q", name)
	}
	return nil
}

// Bounds of a registration: what a node reports of itself is hostile
// input too (a node's host memory of 1e300 GiB, a domain of 1<<62, which
// the topology indexes by, or an escape sequence as its GPU type).
const (
	MaxNodeGPUs     = 64
	MaxGPUMemGiB    = 4096
	MaxHostMemGiB   = 1 << 16 // 64 TiB
	MaxDomain       = 4095
	maxNodeText     = 64  // GPU type, UUID, incarnation
	maxRack         = 128 // rack names
	minLogKey       = 16
	maxLogKey       = 256
	maxAddr         = 300
	maxRunningProcs = 4 * MaxJobGPUs
)

// nodeText checks a string a node registers, or a label (label): valid
// UTF-8 of at most max bytes, without control or format characters
// (visible.Hidden: no escape sequences, bidi overrides or invisible
// characters, which would reach admins' terminals and the dashboard).
func nodeText(field, s string, max int) error {
	if len(s) > max || !utf8.ValidString(s) {
		return Invalid(field, "at most %d bytes of UTF-8, got %d bytes", max, len(s))
	}
	if err := visible.Check(s); err != nil {
		return Invalid(field, "%v", err)
	}
	return nil
}

// asciiToken checks a string of printable ASCII without spaces, of min to
// max bytes (it travels in HTTP headers).
func asciiToken(field, s string, min, max int) error {
	if len(s) < min || len(s) > max {
		return Invalid(field, "want %d to %d characters, got %d", min, max, len(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return Invalid(field, "byte %d is %q: only printable ASCII without spaces", i, s[i])
		}
	}
	return nil
}

var hostNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// ParseNodeAddr checks a node's log address: http://HOST:PORT (a trailing
// "/" allowed), where HOST is an IP address or a DNS name, and nothing else:
// no user info, path, query or fragment. It returns the host and port.
func ParseNodeAddr(addr string) (host, port string, err error) {
	bad := func(format string, a ...any) (string, string, error) {
		return "", "", Invalid("addr", "%q: %s; want http://HOST:PORT", addr, fmt.Sprintf(format, a...))
	}
	if len(addr) > maxAddr {
		return bad("longer than %d bytes", maxAddr)
	}
	u, err := url.Parse(addr)
	switch {
	case err != nil:
		return bad("not a URL")
	case u.Scheme != "http":
		return bad("scheme %q, not http", u.Scheme)
	case u.Opaque != "" || u.User != nil:
		return bad("user info is not allowed")
	case (u.Path != "" && u.Path != "/") || u.RawPath != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(addr, "?#@"):
		return bad("a path, query or fragment is not allowed")
	}
	host, port, err = net.SplitHostPort(u.Host)
	if err != nil {
		return bad("no port")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return bad("port %q is not 1 to 65535", port)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() {
			return bad("host %s is not a unicast address", host)
		}
		return host, port, nil
	}
	if len(host) > 253 || !hostNameRE.MatchString(host) {
		return bad("host %q is neither an IP address nor a DNS name", host)
	}
	return host, port, nil
}

// Validate checks a registration and names the first bad field.
func (r *Registration) Validate() error {
	if err := validNodeName(r.Name); err != nil {
		return err
	}
	switch {
	case len(r.GPUs) == 0 || len(r.GPUs) > MaxNodeGPUs:
		return Invalid("gpus", "a node has 1 to %d GPUs, got %d", MaxNodeGPUs, len(r.GPUs))
	case badNum(r.HostMemGiB) || r.HostMemGiB < 0 || r.HostMemGiB > MaxHostMemGiB:
		return Invalid("host_mem_gib", "must be a number from 0 to %d, got %v", MaxHostMemGiB, r.HostMemGiB)
	case r.Domain < 0 || r.Domain > MaxDomain:
		return Invalid("domain", "must be 0 to %d, got %d", MaxDomain, r.Domain)
	case len(r.Running) > maxRunningProcs:
		return Invalid("running", "%d processes; at most %d", len(r.Running), maxRunningProcs)
	}
	if err := nodeText("rack", r.Rack, maxRack); err != nil {
		return err
	}
	if err := asciiToken("incarnation", r.Incarnation, 1, maxNodeText); err != nil {
		return err
	}
	if err := asciiToken("log_key", r.LogKey, minLogKey, maxLogKey); err != nil {
		return err
	}
	if r.Addr == "" {
		return Invalid("addr", "required")
	}
	if _, _, err := ParseNodeAddr(r.Addr); err != nil {
		return err
	}
	typ := r.GPUs[0].Type
	for i, g := range r.GPUs {
		f := fmt.Sprintf("gpus[%d]", i)
		switch {
		case g.Index != i:
			return Invalid(f+".index", "want %d (indices 0..n-1 in order), got %d", i, g.Index)
		case g.Type != typ:
			return Invalid(f+".type", "a node has one GPU type: %q, then %q", typ, g.Type)
		case badNum(g.MemGiB) || g.MemGiB < 0 || g.MemGiB > MaxGPUMemGiB:
			return Invalid(f+".mem_gib", "must be a number from 0 to %d, got %v", MaxGPUMemGiB, g.MemGiB)
		}
		if err := nodeText(f+".uuid", g.UUID, maxNodeText); err != nil {
			return err
		}
	}
	if typ == "" {
		return Invalid("gpus[0].type", "required")
	}
	return nodeText("gpus[0].type", typ, maxNodeText)
}

// MaxIdempotencyKey is the longest idempotency key accepted, in bytes.
const MaxIdempotencyKey = 255

// idempotencyKey checks an idempotency key: empty, or 1 to
// MaxIdempotencyKey printable ASCII characters (no spaces), so that it
// travels unchanged in an HTTP header.
func idempotencyKey(field, k string) error {
	if len(k) > MaxIdempotencyKey {
		return Invalid(field, "%d bytes; at most %d", len(k), MaxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return Invalid(field, "byte %d is %q: only printable ASCII without spaces", i, k[i])
		}
	}
	return nil
}
