// CoreDNS for the e2e cluster with only the plugins its Corefile uses
// (tests/e2e/cluster/manifests/coredns.yaml): the same main as CoreDNS's own
// coredns.go, without core/plugin, which links every plugin (cloud SDKs,
// tracing, etcd...) and makes a cold build take several times longer.
// hack/install-node.sh builds it in a wrapper module that requires
// github.com/coredns/coredns at the pinned version.
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
