package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os/exec"
	"path/filepath"
)

// secureCluster makes the run's certificates with warrenctl certs, as an
// operator would: a CA, a node certificate per node (naming its address
// too), and a client certificate for the harness's user, whom warrenctl
// then acts as. It returns each node's security flags (mutual TLS between
// the nodes and a gossip key) and sets c.ctlAuth. The harness judges the
// cluster users run: secured, as a node off loopback must be.
func secureCluster(warrenctl, dir string, c *cluster) ([][]string, error) {
	run := func(args ...string) error {
		out, err := exec.Command(warrenctl, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("warrenctl %v: %v: %s", args, err, out)
		}
		return nil
	}
	if err := run("certs", "init", "--dir", dir); err != nil {
		return nil, err
	}
	if err := run("certs", "client", user, "--dir", dir); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	gossipKey := base64.StdEncoding.EncodeToString(key)
	ca := filepath.Join(dir, "ca.pem")
	flags := make([][]string, len(c.nodes))
	for i, nd := range c.nodes {
		if err := run("certs", "node", nd.name, "--dir", dir, "--host", nd.host); err != nil {
			return nil, err
		}
		flags[i] = []string{
			"--tls-ca", ca,
			"--tls-cert", filepath.Join(dir, nd.name+".pem"),
			"--tls-key", filepath.Join(dir, nd.name+"-key.pem"),
			"--gossip-key", gossipKey,
		}
	}
	c.ctlAuth = []string{"--ca", ca, "--cert", filepath.Join(dir, user+".pem"), "--key", filepath.Join(dir, user+"-key.pem")}
	return flags, nil
}
