// Command etcd is etcd's own entry point (the same call as etcd's main.go), built from the pinned
// go.etcd.io/etcd/server/v3 so the harness needs no download of a prebuilt binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
