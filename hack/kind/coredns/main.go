// CoreDNS for streamq's kind node image: the plugins of the Corefile kubeadm
// writes (errors, health, ready, kubernetes, prometheus, forward, cache, loop,
// reload, loadbalance), in the main of CoreDNS's own coredns.go. The plugin
// order comes from core/dnsserver's directives, not from these imports.
// hack/kind-image.sh builds it in a wrapper module requiring
// github.com/coredns/coredns at the version kubeadm names.
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
