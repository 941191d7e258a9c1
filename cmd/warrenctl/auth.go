package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"

	"google.golang.org/grpc"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/warrenmq/warren/cluster/pki"
)

// credentials are how warrenctl proves who it is to a node's admin
// service: a client certificate from the cluster CA (its CN is the user),
// or a user's name and password; either way the user's tags decide what
// it may do. With --ca the connection is TLS and the node must prove it is
// one of the cluster's nodes. A node without TLS on loopback (make run)
// needs neither.
type credentials struct {
	ca, cert, key  string
	user, password string
}

func credentialsFromEnv(getenv func(string) string) credentials {
	return credentials{
		ca: getenv("WARRENCTL_CA"), cert: getenv("WARRENCTL_CERT"), key: getenv("WARRENCTL_KEY"),
		user: getenv("WARRENCTL_USER"), password: getenv("WARRENCTL_PASSWORD"),
	}
}

// define adds the credential flags to fs, except any a command already
// defines for itself (list permissions --user, close connections --user):
// there the command's flag wins, and the credential is given before the
// command's name (warrenctl --user admin list permissions --user alice) or
// in its WARRENCTL_* variable.
func (c *credentials) define(fs *flag.FlagSet) {
	stringVar := func(p *string, name, value, usage string) {
		if fs.Lookup(name) == nil {
			fs.StringVar(p, name, value, usage)
		}
	}
	stringVar(&c.ca, "ca", c.ca, "the cluster CA's certificate (ca.pem): talk TLS and check that the node is one of the cluster's (default $WARRENCTL_CA)")
	stringVar(&c.cert, "cert", c.cert, "a client certificate from the cluster CA, naming the user to act as (default $WARRENCTL_CERT)")
	stringVar(&c.key, "key", c.key, "the client certificate's key (default $WARRENCTL_KEY)")
	stringVar(&c.user, "user", c.user, "act as this user, with --password (default $WARRENCTL_USER)")
	stringVar(&c.password, "password", c.password, "the user's password (default $WARRENCTL_PASSWORD; prefer the variable: a flag shows in the process list)")
}

func (c *credentials) dialOptions() ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	if (c.cert == "") != (c.key == "") {
		return nil, errors.New("--cert and --key go together")
	}
	if c.cert != "" && c.ca == "" {
		return nil, errors.New("--cert needs --ca")
	}
	if c.ca == "" {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		files := pki.Files{Cert: c.cert, Key: c.key, CA: c.ca}
		cfg, err := pki.OperatorClientConfig(files)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(grpccreds.NewTLS(cfg)))
	}
	if c.user != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(basicAuth{c.user, c.password, c.ca != ""}))
	}
	return opts, nil
}

// basicAuth sends a user's name and password with every call.
type basicAuth struct {
	user, password string
	secure         bool
}

func (b basicAuth) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(b.user+":"+b.password))}, nil
}

// RequireTransportSecurity is false only so that a password reaches a
// plaintext node on loopback; over a network, use --ca.
func (b basicAuth) RequireTransportSecurity() bool { return b.secure }
