// Command etcd is etcd v3.6.16's server (etcdmain, as upstream's main), built from
// the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
