// Command gandiva is the scheduler's one binary: the trace-driven simulator
// (sim), the paper reproductions (reproduce), and the live scheduler (up,
// server, agent) with its client commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gandiva-sched/gandiva/internal/agent"
	"github.com/gandiva-sched/gandiva/internal/visible"
)

func main() {
	agent.GuardMain() // (run as a job's guard, it guards and exits: internal/agent/guard.go)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	if err := root.ExecuteContext(ctx); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// Ctrl-C or SIGTERM: what was stopped said so; "context
			// canceled" would read as a failure.
			fmt.Fprintln(os.Stderr, "gandiva: interrupted")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "gandiva:", errorText(err))
		os.Exit(1)
	}
}

// errorText is an error's message for the terminal, each line through
// visible.String: the server's errors quote what users and nodes sent.
func errorText(err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = visible.String(l)
	}
	return strings.Join(lines, "\n")
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "gandiva",
		Short: "Gandiva: an introspective scheduler for deep-learning training on shared GPU clusters",
		Long: `Gandiva schedules deep-learning training jobs on shared GPU clusters: time-slicing,
packing, migration and grow-shrink judged by each job's own progress rate, fair shares of GPU
throughput, Tiresias' 2D-LAS and 2D-Gittins, and Philly's locality-aware placement.

The same policy code runs in the trace-driven simulator (gandiva sim) and live.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newSimCmd(), newClustersCmd(), newReproduceCmd(), newTraceCmd(), newWhatifCmd())
	root.AddCommand(newServerCmd(), newAgentCmd(), newUpCmd(), newTrainerCmd(), newKubeCmd())
	root.AddCommand(clientCmds()...)
	return root
}
