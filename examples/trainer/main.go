// Command trainer is Gandiva's deterministic example job; see package
// github.com/gandiva-sched/gandiva/examples/trainer/trainer for its flags.
package main

import (
	"os"

	"github.com/gandiva-sched/gandiva/examples/trainer/trainer"
)

func main() { os.Exit(trainer.Main(os.Args[1:], os.Stdout, os.Stderr)) }
