// capshim: a runc wrapper for machines whose capability bounding set lacks
// capabilities a privileged container asks for.
//
// runc refuses a container whose spec lists a capability the calling process
// cannot hold ("unable to apply caps: operation not permitted"); Docker and
// containerd give privileged containers every capability they know, so on a VM
// without CAP_SYS_RESOURCE in its bounding set no privileged container starts
// (kind's nodes are privileged, and so are some pods inside them). This wrapper
// removes from the OCI spec every capability outside its own bounding set
// (read from /proc/self/status), then execs the real runc with the same
// arguments. Containers get every capability the machine can give.
//
// Registered as a runtime (`dockerd --add-runtime capshim=/path
// --default-runtime capshim`, or containerd's runc `BinaryName`). The real runc
// is $STREAMQ_REAL_RUNC, else the first `runc` on PATH that is not this file.
//
// Edited: <bundle>/config.json for `create` and `run` (bundle from --bundle/-b,
// else the working directory), and the --process/-p file of `exec`.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// capNames indexes capabilities by number (linux/capability.h).
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// missingCaps: the known capabilities whose bit is clear in the bounding set.
func missingCaps(capBnd uint64) map[string]bool {
	missing := map[string]bool{}
	for i, name := range capNames {
		if capBnd&(1<<uint(i)) == 0 {
			missing[name] = true
		}
	}
	return missing
}

func boundingSet() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "CapBnd:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no CapBnd in /proc/self/status")
}

// stripCaps removes the missing capabilities from every list of a
// "capabilities" object; reports whether anything changed.
func stripCaps(caps map[string]any, missing map[string]bool) bool {
	changed := false
	for kind, v := range caps {
		list, ok := v.([]any)
		if !ok {
			continue
		}
		kept := make([]any, 0, len(list))
		for _, c := range list {
			if name, ok := c.(string); ok && missing[name] {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		caps[kind] = kept
	}
	return changed
}

// editFile rewrites a JSON file with the capabilities found at path (a list of
// keys: ["process", "capabilities"] for a bundle's config.json).
func editFile(file string, keys []string, missing map[string]bool) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	obj := doc
	for _, k := range keys {
		next, ok := obj[k].(map[string]any)
		if !ok {
			return nil
		}
		obj = next
	}
	if !stripCaps(obj, missing) {
		return nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	st, err := os.Stat(file)
	if err != nil {
		return err
	}
	tmp := file + ".capshim"
	if err := os.WriteFile(tmp, out, st.Mode().Perm()); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// flagValue finds `--name v`, `--name=v`, `-s v` in args.
func flagValue(args []string, long, short string) string {
	for i, a := range args {
		if a == long || (short != "" && a == short) {
			if i+1 < len(args) {
				return args[i+1]
			}
		} else if v, ok := strings.CutPrefix(a, long+"="); ok {
			return v
		}
	}
	return ""
}

// command: the first runc subcommand among the arguments (global flags with
// values come before it: --root, --log, --log-format, --criu, --rootless).
func command(args []string) (string, []string) {
	withValue := map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if withValue[a] {
			i++
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		return a, args[i+1:]
	}
	return "", nil
}

func realRunc() (string, error) {
	if p := os.Getenv("STREAMQ_REAL_RUNC"); p != "" {
		return p, nil
	}
	self, _ := os.Executable()
	self, _ = filepath.EvalSymlinks(self)
	for _, dir := range filepath.SplitList(os.Getenv("PATH") + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") {
		p := filepath.Join(dir, "runc")
		if r, err := filepath.EvalSymlinks(p); err == nil && r != self {
			if st, err := os.Stat(r); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("capshim: no runc on PATH")
}

func main() {
	args := os.Args[1:]
	if bnd, err := boundingSet(); err == nil {
		if missing := missingCaps(bnd); len(missing) > 0 {
			cmd, rest := command(args)
			var err error
			switch cmd {
			case "create", "run":
				bundle := flagValue(rest, "--bundle", "-b")
				if bundle == "" {
					bundle, _ = os.Getwd()
				}
				err = editFile(filepath.Join(bundle, "config.json"), []string{"process", "capabilities"}, missing)
			case "exec":
				if p := flagValue(rest, "--process", "-p"); p != "" {
					err = editFile(p, []string{"capabilities"}, missing)
				}
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "capshim: %v\n", err)
				os.Exit(1)
			}
		}
	}
	runc, err := realRunc()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if path, err := exec.LookPath(runc); err == nil {
		runc = path
	}
	err = syscall.Exec(runc, append([]string{"runc"}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "capshim: exec %s: %v\n", runc, err)
	os.Exit(1)
}
