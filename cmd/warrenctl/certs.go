package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/warrenmq/warren/cluster/pki"
	"github.com/warrenmq/warren/proto/adminpb"
)

// The certs commands make a cluster's certificates with no other tool:
// they run on the operator's machine and ask no node (offline).
var certsCommands = []*command{
	{
		name:    "certs init",
		summary: "make a cluster CA in --dir (default ./certs)",
		help: `Makes a new certificate authority for one cluster: --dir/ca.pem (give it to
every node and client as the CA bundle) and --dir/ca-key.pem (keep it
secret; only 'certs node' and 'certs client' need it). Refuses to replace
an existing CA, since every certificate it issued would stop being trusted.`,
		setup:   certsInit,
		offline: true,
	},
	{
		name:    "certs node",
		args:    []string{"NAME"},
		summary: "issue node NAME's certificate from the CA in --dir",
		help: `Issues the certificate of node NAME (its --node-name) from the CA in --dir,
into --out (default: --dir): NAME.pem and NAME-key.pem. It authenticates
the node both as a server and as a client of its peers, and names the node
so that peers can check that a node is who it claims to be in gossip and in
Raft. --host (repeatable) adds the DNS names and IP addresses clients reach
the node at; localhost, 127.0.0.1 and ::1 are always included.`,
		setup:   certsNode,
		offline: true,
	},
	{
		name:    "certs client",
		args:    []string{"USER"},
		summary: "issue a client certificate for USER (AMQPS EXTERNAL, warrenctl)",
		help: `Issues a client certificate whose common name is USER, from the CA in --dir,
into --out (default: --dir): USER.pem and USER-key.pem. Applications log in
as USER with the EXTERNAL mechanism over AMQPS; warrenctl authenticates as
USER with --cert and --key. USER must exist in the cluster (warrenctl add
user) with the tags and permissions it needs.`,
		setup:   certsClient,
		offline: true,
	},
}

func init() { commands = append(commands, certsCommands...) }

type certsFlags struct {
	dir, out string
	validity time.Duration
	hosts    hostList
}

type hostList []string

func (h *hostList) String() string     { return strings.Join(*h, ",") }
func (h *hostList) Set(v string) error { *h = append(*h, v); return nil }

func (f *certsFlags) define(fs *flag.FlagSet, withHosts bool) {
	fs.StringVar(&f.dir, "dir", "certs", "the folder of the cluster's CA")
	fs.StringVar(&f.out, "out", "", "where to write the certificate and key (default: --dir)")
	fs.DurationVar(&f.validity, "validity", pki.LeafValidity, "how long the certificate is valid")
	if withHosts {
		fs.Var(&f.hosts, "host", "a DNS name or IP address the node is reached at (repeatable)")
	}
}

type certsReport struct {
	Certificate string `json:"certificate"`
	Key         string `json:"key,omitempty"`
	CA          string `json:"ca"`
}

func (r *certsReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "certificate: %s\n", r.Certificate)
	if r.Key != "" {
		fmt.Fprintf(w, "key:         %s\n", r.Key)
	}
	fmt.Fprintf(w, "CA bundle:   %s\n", r.CA)
}

func certsInit(fs *flag.FlagSet) body {
	var f certsFlags
	f.define(fs, false)
	name := fs.String("name", "Warren cluster CA", "the CA's common name")
	return func(context.Context, adminpb.AdminClient, []string) (report, error) {
		if err := pki.InitCA(f.dir, *name); err != nil {
			return nil, err
		}
		return &certsReport{Certificate: filepath.Join(f.dir, pki.CACertFile), Key: filepath.Join(f.dir, pki.CAKeyFile), CA: filepath.Join(f.dir, pki.CACertFile)}, nil
	}
}

func certsNode(fs *flag.FlagSet) body {
	var f certsFlags
	f.define(fs, true)
	return func(_ context.Context, _ adminpb.AdminClient, args []string) (report, error) {
		return f.issue(pki.Request{Kind: pki.Node, Name: args[0], Hosts: f.hosts, Validity: f.validity})
	}
}

func certsClient(fs *flag.FlagSet) body {
	var f certsFlags
	f.define(fs, false)
	return func(_ context.Context, _ adminpb.AdminClient, args []string) (report, error) {
		return f.issue(pki.Request{Kind: pki.Client, Name: args[0], Validity: f.validity})
	}
}

func (f *certsFlags) issue(req pki.Request) (report, error) {
	out := f.out
	if out == "" {
		out = f.dir
	}
	cert, key, err := pki.Issue(f.dir, out, req)
	if err != nil {
		return nil, err
	}
	return &certsReport{Certificate: cert, Key: key, CA: filepath.Join(f.dir, pki.CACertFile)}, nil
}
