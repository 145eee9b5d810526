package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/types"
)

// peerPID returns the pid of the process at the other end of a Unix
// connection, as the kernel recorded it when it connected (SO_PEERCRED).
func peerPID(conn net.Conn) (int, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("not a Unix connection: %T", conn)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		cred *syscall.Ucred
		serr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return int(cred.Pid), nil
}

// CgroupCheck is the default Options.PeerCheck: the process's cgroups
// (/proc/PID/cgroup, as the agent sees it: the DaemonSet runs with the
// host's PID namespace) must name the pod's UID, as the kubelet's cgroup
// paths do (kubepods/.../pod<UID>, or kubepods-...-pod<UID with _>.slice
// with the systemd driver). A process in another pod's cgroup is refused.
// A process whose cgroups name no pod at all (no "kubepods" in them: not
// run by a kubelet, as in the tests' stand-in kubelet) is accepted: only
// a process that can reach the pod's socket directory, which is mounted
// into that pod alone and not listable on the host, can connect at all.
func CgroupCheck(pid int, podUID types.UID) error {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("process %d: no /proc/%d/cgroup (is the agent in the host's PID namespace?)", pid, pid)
	}
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	return checkCgroup(string(b), pid, podUID)
}

func checkCgroup(cg string, pid int, podUID types.UID) error {
	uid := string(podUID)
	if strings.Contains(cg, uid) || strings.Contains(cg, strings.ReplaceAll(uid, "-", "_")) {
		return nil
	}
	if strings.Contains(cg, "kubepods") {
		return fmt.Errorf("process %d is in another pod's cgroup, not pod %s's", pid, uid)
	}
	return nil
}
