package trace

import (
	"bytes"
	"os"
	"testing"
)

// fuzzRead reads data as format f and checks the contract on success.
func fuzzRead(t *testing.T, f Format, data []byte, o Options) {
	specs, w, err := Read(bytes.NewReader(data), "fuzz", f, o)
	if err != nil {
		return
	}
	if w == nil || len(specs) == 0 {
		t.Fatalf("no error, %d jobs, warnings %v", len(specs), w)
	}
	checkContract(t, specs)
}

func FuzzTiresias(f *testing.F) {
	f.Add([]byte(tiresiasHead + "0,1,0,606,vgg19,164,30\n1,8,30,133,vgg11,147,23\n"))
	f.Add([]byte("job_id,num_gpu,submit_time,duration,user,vc\na,2,1e9,3.5,u,v\n"))
	if b, err := os.ReadFile(sharedData + "tiresias/60_job.csv"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, Tiresias, data, Options{}) })
}

func FuzzPhillyCSV(f *testing.F) {
	f.Add([]byte(phillyHead+"2017-10-09 07:01:55,66.0,1,66.0,aa\n2017-10-09 06:13:03,2951.0,2,5902.0,bb\n"), uint8(0))
	f.Add([]byte(phillyHead+"2017-10-09 07:01:55,0,1,0,aa\n2017-10-09 07:01:55,1e308,128,0,aa\n"), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, limit uint8) {
		fuzzRead(t, PhillyCSV, data, Options{Limit: int(limit % 4), Seed: uint64(limit)})
	})
}

func FuzzPhillyJSON(f *testing.F) {
	f.Add([]byte(phillyJSON))
	f.Add([]byte(`[{"jobid":"a","submitted_time":"2017-10-03 10:40:56","attempts":[{"start_time":"2017-10-03 10:40:56","end_time":null,"detail":[{"gpus":null}]}]}]`))
	f.Add([]byte(`{"jobid":"a","submitted_time":"2017-10-03 10:40:56","attempts":[{"start_time":"2017-10-03 10:40:56","end_time":"2017-10-04 10:40:56","detail":[{"gpus":["g"]}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, PhillyJSON, data, Options{}) })
}

func FuzzGavel(f *testing.F) {
	if b, err := os.ReadFile("testdata/sample.trace"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("A3C\tcmd\t--max-steps\t0\t500\t3\t1\nLM (batch size 5)\tc\t-n\t1\t9\t2\t1\t-1\t0\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, Gavel, data, Options{}) })
}

// FuzzAuto exercises format detection with every reader behind it.
func FuzzAuto(f *testing.F) {
	f.Add([]byte(tiresiasHead + "0,1,0,606,vgg19,164,30\n"))
	f.Add([]byte(phillyHead + "2017-10-09 07:01:55,66.0,1,66.0,aa\n"))
	f.Add([]byte(phillyJSON))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, Auto, data, Options{}) })
}
