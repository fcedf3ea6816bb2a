// kindnet: the pod network of streamq's kind node image, in the role of kind's
// kindnetd (which cannot be fetched here): a DaemonSet on every node, host
// network, that
//
//   - writes the node's CNI config (/etc/cni/net.d/10-kindnet.conflist): ptp
//     veths with host-local addresses from the node's spec.podCIDR, plus
//     portmap, as kindnetd does; containerd reports the network ready from then on;
//   - routes every other node's podCIDR through that node's InternalIP
//     (`ip route replace`), so pods on different nodes reach each other.
//
// No masquerading and no network policies: pods talk to pods, Services and
// nodes. It reads nodes from the API server with the pod's service account
// (the standard library only: no client-go).
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

const (
	saDir      = "/var/run/secrets/kubernetes.io/serviceaccount"
	confFile   = "10-kindnet.conflist"
	ipamState  = "/run/cni-ipam-state"
	defaultMTU = 1500
)

type node struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		PodCIDR  string   `json:"podCIDR"`
		PodCIDRs []string `json:"podCIDRs"`
	} `json:"spec"`
	Status struct {
		Addresses []struct {
			Type    string `json:"type"`
			Address string `json:"address"`
		} `json:"addresses"`
	} `json:"status"`
}

type nodeList struct {
	Items []node `json:"items"`
}

// ipv4CIDR: the node's IPv4 pod range ("" when it has none yet).
func ipv4CIDR(n node) string {
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	for _, c := range cidrs {
		if ip, _, err := net.ParseCIDR(c); err == nil && ip.To4() != nil {
			return c
		}
	}
	return ""
}

func internalIPv4(n node) string {
	for _, a := range n.Status.Addresses {
		if ip := net.ParseIP(a.Address); a.Type == "InternalIP" && ip != nil && ip.To4() != nil {
			return a.Address
		}
	}
	return ""
}

// conflist renders the CNI configuration for a node's pod range.
func conflist(podCIDR string, mtu int) ([]byte, error) {
	if _, _, err := net.ParseCIDR(podCIDR); err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", podCIDR, err)
	}
	conf := map[string]any{
		"cniVersion": "0.3.1",
		"name":       "kindnet",
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": false,
				"mtu":    mtu,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": ipamState,
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
					"ranges":  []any{[]any{map[string]any{"subnet": podCIDR}}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// routes: podCIDR -> gateway for every other node that has both.
func routes(nodes []node, self string) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		if n.Metadata.Name == self {
			continue
		}
		if cidr, ip := ipv4CIDR(n), internalIPv4(n); cidr != "" && ip != "" {
			out[cidr] = ip
		}
	}
	return out
}

type api struct {
	client *http.Client
	base   string
	token  string
}

func newAPI() (*api, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, fmt.Errorf("KUBERNETES_SERVICE_HOST/PORT not set: not in a pod")
	}
	ca, err := os.ReadFile(filepath.Join(saDir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s/ca.crt", saDir)
	}
	return &api{
		client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
		base:   "https://" + net.JoinHostPort(host, port),
	}, nil
}

func (a *api) nodes() ([]node, error) {
	token, err := os.ReadFile(filepath.Join(saDir, "token")) // re-read: projected tokens rotate
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequest("GET", a.base+"/api/v1/nodes", nil)
	req.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(token)))
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/nodes: %s: %s", resp.Status, body)
	}
	var list nodeList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func writeIfChanged(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, path)
}

func sync(a *api, self, confDir string, applied map[string]string) error {
	nodes, err := a.nodes()
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Metadata.Name != self {
			continue
		}
		cidr := ipv4CIDR(n)
		if cidr == "" {
			return fmt.Errorf("node %s has no IPv4 podCIDR yet", self)
		}
		data, err := conflist(cidr, defaultMTU)
		if err != nil {
			return err
		}
		if changed, err := writeIfChanged(filepath.Join(confDir, confFile), data); err != nil {
			return err
		} else if changed {
			log.Printf("wrote %s for pod range %s", filepath.Join(confDir, confFile), cidr)
		}
	}
	for cidr, gw := range routes(nodes, self) {
		if applied[cidr] == gw {
			continue
		}
		if out, err := exec.Command("ip", "route", "replace", cidr, "via", gw).CombinedOutput(); err != nil {
			return fmt.Errorf("ip route replace %s via %s: %v: %s", cidr, gw, err, out)
		}
		applied[cidr] = gw
		log.Printf("route %s via %s", cidr, gw)
	}
	return nil
}

func main() {
	self := os.Getenv("NODE_NAME")
	if self == "" {
		log.Fatal("NODE_NAME is not set (downward API spec.nodeName)")
	}
	confDir := os.Getenv("CNI_CONF_DIR")
	if confDir == "" {
		confDir = "/etc/cni/net.d"
	}
	a, err := newAPI()
	if err != nil {
		log.Fatal(err)
	}
	applied := map[string]string{}
	for {
		if err := sync(a, self, confDir, applied); err != nil {
			log.Printf("sync: %v", err)
			time.Sleep(2 * time.Second)
			continue
		}
		time.Sleep(10 * time.Second)
	}
}
