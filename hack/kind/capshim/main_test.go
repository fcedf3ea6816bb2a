package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMissingCaps(t *testing.T) {
	m := missingCaps(0x000001fffeffffff)
	if len(m) != 1 || !m["CAP_SYS_RESOURCE"] {
		t.Fatalf("missing = %v, want only CAP_SYS_RESOURCE", m)
	}
	if len(missingCaps(0x000001ffffffffff)) != 0 {
		t.Fatal("a full bounding set misses nothing")
	}
}

func TestCommand(t *testing.T) {
	cmd, rest := command([]string{"--root", "/run/x", "--log", "/l", "--systemd-cgroup", "create", "--bundle", "/b", "id"})
	if cmd != "create" || flagValue(rest, "--bundle", "-b") != "/b" {
		t.Fatalf("got %q %v", cmd, rest)
	}
	cmd, rest = command([]string{"exec", "--process=/p.json", "id"})
	if cmd != "exec" || flagValue(rest, "--process", "-p") != "/p.json" {
		t.Fatalf("got %q %v", cmd, rest)
	}
}

func TestEditFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "config.json")
	os.WriteFile(f, []byte(`{"ociVersion":"1","process":{"capabilities":{"bounding":["CAP_KILL","CAP_SYS_RESOURCE"],"effective":["CAP_SYS_RESOURCE"]}}}`), 0o600)
	if err := editFile(f, []string{"process", "capabilities"}, map[string]bool{"CAP_SYS_RESOURCE": true}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(f)
	if strings.Contains(string(data), "SYS_RESOURCE") || !strings.Contains(string(data), "CAP_KILL") || !strings.Contains(string(data), `"ociVersion":"1"`) {
		t.Fatalf("edited: %s", data)
	}
	st, _ := os.Stat(f)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
}
