package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/gandiva-sched/gandiva/internal/agent"
	"github.com/gandiva-sched/gandiva/internal/agent/jobproc"
	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/visible"
)

// defaultJobAccount is the account checkJobAccess checks as by default.
const defaultJobAccount = agent.DefaultAccount

// checkJobAccess checks, when the server is on this machine (so the job
// runs here), that the OS account the job will run as can enter its
// working directory and run its command (jobproc.CheckAccess), and refuses
// a submission that would fail at the job's start, with the fix; problems
// that need not stop the job (a working directory it cannot write) are
// written to warn.
//
// The account is --job-account, else agent.DefaultAccount (what an agent
// running as root runs jobs as unless told otherwise) when it exists here;
// "none" skips the check. The command is resolved on this process's PATH,
// standing for the local agent's.
func checkJobAccess(ctx context.Context, rq *api.JobRequest, server, account string, warn io.Writer) error {
	if account == "none" || !isLoopback(server) || len(rq.Command) == 0 {
		return nil
	}
	name := account
	if name == "" {
		name = defaultJobAccount
	}
	u, err := user.Lookup(name)
	if err != nil {
		if account == "" {
			return nil // (no such account here: the local agent runs jobs under another rule)
		}
		return fmt.Errorf("--job-account %s: no such OS account on this machine", name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	switch {
	case err1 != nil || err2 != nil:
		return fmt.Errorf("--job-account %s: uid %q, gid %q: not numbers", name, u.Uid, u.Gid)
	case uid == 0:
		return fmt.Errorf("--job-account %s: a job never runs as root", name)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	probs, err := jobproc.CheckAccess(ctx, jobproc.Access{Credential: cred, Account: name,
		WorkDir: rq.WorkDir, Command: rq.Command, Path: os.Getenv("PATH")})
	if err != nil {
		fmt.Fprintf(warn, "gandiva submit: could not check what account %s can use (%v); submitting anyway\n", name, err)
		return nil
	}
	var fatal []string
	for _, p := range probs {
		if p.Fatal {
			fatal = append(fatal, "  "+visible.String(p.String()))
		} else {
			fmt.Fprintf(warn, "gandiva submit: warning: %s\n", visible.String(p.String()))
		}
	}
	if len(fatal) == 0 {
		return nil
	}
	how := "--job-account"
	if account == "" {
		how = "the default of --job-account: the account an agent running as root runs jobs as, unless its --run-as says otherwise"
	}
	return errors.New("the job would fail at its start: on this machine it runs as OS account " + name + ", and\n" +
		strings.Join(fatal, "\n") + "\n(checked as " + name + ", " + how + "; --job-account ACCOUNT checks as another, --job-account none skips the check)")
}
