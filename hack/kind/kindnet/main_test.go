package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func mkNode(name, cidr, ip string) node {
	var n node
	n.Metadata.Name = name
	n.Spec.PodCIDR = cidr
	if cidr != "" {
		n.Spec.PodCIDRs = []string{"fd00::/64", cidr}
	}
	if ip != "" {
		n.Status.Addresses = append(n.Status.Addresses, struct {
			Type    string `json:"type"`
			Address string `json:"address"`
		}{"InternalIP", ip})
	}
	return n
}

func TestConflist(t *testing.T) {
	data, err := conflist("10.244.1.0/24", 1500)
	if err != nil {
		t.Fatal(err)
	}
	var conf map[string]any
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	plugins := conf["plugins"].([]any)
	if plugins[0].(map[string]any)["type"] != "ptp" || plugins[1].(map[string]any)["type"] != "portmap" {
		t.Fatalf("plugins: %s", data)
	}
	if !strings.Contains(string(data), `"subnet": "10.244.1.0/24"`) {
		t.Fatalf("no subnet: %s", data)
	}
	if _, err := conflist("nonsense", 1500); err == nil {
		t.Fatal("a bad CIDR is refused")
	}
}

func TestIPv4CIDRSkipsIPv6(t *testing.T) {
	if got := ipv4CIDR(mkNode("a", "10.244.0.0/24", "")); got != "10.244.0.0/24" {
		t.Fatalf("got %q", got)
	}
	if got := ipv4CIDR(mkNode("a", "", "")); got != "" {
		t.Fatalf("got %q", got)
	}
}

func TestRoutes(t *testing.T) {
	nodes := []node{
		mkNode("cp", "10.244.0.0/24", "172.18.0.2"),
		mkNode("w1", "10.244.1.0/24", "172.18.0.3"),
		mkNode("w2", "", "172.18.0.4"), // no range yet
	}
	got := routes(nodes, "cp")
	if len(got) != 1 || got["10.244.1.0/24"] != "172.18.0.3" {
		t.Fatalf("routes = %v", got)
	}
}
