package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gandiva-sched/gandiva/internal/experiment"
)

// newTraceCmd groups the trace generators the reproductions use, so their
// inputs can be written out and replayed with `gandiva sim`.
func newTraceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Write the synthetic traces the reproductions use",
		Args:  cobra.NoArgs,
	}
	d := experiment.DefaultHeavyTail()
	cfg := d
	var out string
	heavy := &cobra.Command{
		Use:   "heavytail",
		Short: "Write the heavy-tailed trace of `gandiva reproduce tiresias` (Tiresias' trace format)",
		Long: "Write the heavy-tailed trace of `gandiva reproduce tiresias`: job GPU-times drawn from Tiresias'\n" +
			"production samples (yarn-gput10000.csv), gang sizes from Philly's jobs of similar GPU-time, Poisson\n" +
			"arrivals at the given offered load. Seed 1 with the defaults is the committed\n" +
			"internal/experiment/testdata/tiresias/heavytail.csv; the reproduction's checks use seeds 1 to 20.\n\n" +
			"  gandiva trace heavytail --seed 7 --out ht7.csv\n" +
			"  gandiva sim --trace ht7.csv --cluster tiresias-n8g8 --policy fifo,tiresias-l,srsf --seed 7",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := firstErr(intBetween("--jobs", cfg.Jobs, 1, 10_000_000), intBetween("--gpus", cfg.GPUs, 1, 10_000_000),
				between("--load", cfg.Load, 1e-6, 100)); err != nil {
				return err
			}
			data, err := experiment.HeavyTail(cfg)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			if err := os.WriteFile(out, data, 0o644); err != nil {
				return fmt.Errorf("writing the trace: %w", err)
			}
			return nil
		},
	}
	heavy.Flags().IntVar(&cfg.Jobs, "jobs", d.Jobs, "number of jobs")
	heavy.Flags().Uint64Var(&cfg.Seed, "seed", d.Seed, "random seed of the draws")
	heavy.Flags().IntVar(&cfg.GPUs, "gpus", d.GPUs, "cluster size the offered load refers to")
	heavy.Flags().Float64Var(&cfg.Load, "load", d.Load, "offered load within the arrival window (0.8 = 80%)")
	heavy.Flags().StringVarP(&out, "out", "o", "", "write to this file (default: standard output)")
	cmd.AddCommand(heavy)
	return cmd
}
