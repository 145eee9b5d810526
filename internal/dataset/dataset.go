// Package dataset embeds the small public data sets Gandiva needs at run
// time, so the binary works without ../shared/data:
//
//   - gavel_throughputs.json: per-GPU-type and co-located training
//     throughputs of 26 job types at scales 1/2/4/8 (stanford-futuredata/gavel,
//     MIT licence, LICENSE.gavel).
//   - model_tensors.csv, yarn-gput{1000,5000,10000}.csv, 60_job.csv: model
//     tensor sizes, production job GPU-time samples and the 60-job trace of the
//     Tiresias simulator (SymbioticLab/Tiresias, Apache-2.0, LICENSE.tiresias).
//   - philly-sample.csv: a sample of the public Philly trace (msr-fiddle,
//     pre-processed by petuum/adaptdl; CC BY 4.0, LICENSE.philly; cite Jeon et
//     al., ATC'19): the 850 jobs that virtual cluster 6c71a0 submitted in
//     its first three weeks (2017-09-04 to 09-25), same columns as philly.csv.
//     Their average demand is 60 GPUs, so on the 64-GPU philly-sample
//     cluster the queue builds up and policies differ.
//
// Every file keeps its licence beside it.
package dataset

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed files
var files embed.FS

// Open returns an embedded file by base name.
func Open(name string) (fs.File, error) {
	f, err := files.Open("files/" + name)
	if err != nil {
		return nil, fmt.Errorf("embedded data set %q: %w", name, err)
	}
	return f, nil
}

// ReadFile returns the bytes of an embedded file by base name.
func ReadFile(name string) ([]byte, error) {
	b, err := files.ReadFile("files/" + name)
	if err != nil {
		return nil, fmt.Errorf("embedded data set %q: %w", name, err)
	}
	return b, nil
}

// Names lists the embedded files.
func Names() []string {
	ents, _ := files.ReadDir("files")
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
