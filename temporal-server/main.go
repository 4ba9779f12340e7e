// Command sterna-temporal-server runs a single-process Temporal server on SQLite, as
// `temporal server start-dev` does, but built from a current go.temporal.io/server
// (the CLI tags that embed one do not build offline) and with Temporal's JWT
// authorization available: the default claim mapper and authorizer, keys from a JWKS URL.
//
// Its flags follow `temporal server start-dev` where both have one, so a launcher can
// run either binary with the same arguments.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// repeated collects a flag given several times (--namespace a --namespace b).
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "sterna-temporal-server: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("sterna-temporal-server", flag.ContinueOnError)
	var o options
	var namespaces, searchAttributes, dynamicConfig repeated
	var showVersion bool
	fs.StringVar(&o.ip, "ip", "127.0.0.1", "IP address the frontend, the UI and the metrics bind to")
	fs.IntVar(&o.port, "port", 7233, "frontend gRPC port")
	fs.IntVar(&o.httpPort, "http-port", 0, "frontend HTTP API port (a free one when 0)")
	fs.IntVar(&o.metricsPort, "metrics-port", 0, "Prometheus metrics port (none when 0)")
	fs.IntVar(&o.uiPort, "ui-port", 0, "web UI port (frontend port + 1000 when 0)")
	fs.BoolVar(&o.headless, "headless", false, "run without the web UI")
	fs.StringVar(&o.uiCodecEndpoint, "ui-codec-endpoint", "", "codec server the web UI decodes payloads with")
	fs.StringVar(&o.dbFile, "db-filename", "", "SQLite file that keeps state across restarts (in memory when empty)")
	fs.StringVar(&o.logLevel, "log-level", "warn", "server log level: debug, info, warn, error")
	fs.Var(&namespaces, "namespace", "namespace to create besides \"default\" (repeatable)")
	fs.Var(&searchAttributes, "search-attribute", "custom search attribute NAME=TYPE in every namespace (repeatable)")
	fs.Var(&dynamicConfig, "dynamic-config-value", "dynamic config KEY=JSON (repeatable)")
	fs.StringVar(&o.jwksURL, "jwks-url", "", "switch on JWT authorization with signing keys from this JWKS URL")
	fs.StringVar(&o.permissionsClaim, "jwt-permissions-claim", "permissions", "JWT claim holding permissions such as \"team-a:write\"")
	fs.StringVar(&o.audience, "jwt-audience", "", "audience a token must name (any when empty)")
	fs.DurationVar(&o.jwksRefresh, "jwks-refresh-interval", time.Minute, "how often the signing keys are fetched again")
	fs.BoolVar(&showVersion, "version", false, "print the versions of the server and UI built in, then exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags only; see --help)", fs.Arg(0))
	}
	if showVersion {
		fmt.Println(versionLine())
		return nil
	}
	if o.ip == "localhost" {
		// The server's membership needs an IP, as in the CLI.
		o.ip = "127.0.0.1"
	}
	o.namespaces = append([]string{"default"}, namespaces...)
	var err error
	if o.searchAttributes, err = parseSearchAttributes(searchAttributes); err != nil {
		return err
	}
	if o.dynamicConfig, err = parseDynamicConfig(dynamicConfig); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}

	srv, err := start(o)
	if err != nil {
		return err
	}
	// The launcher reads these lines; readiness itself is the frontend answering.
	fmt.Printf("%s\nServer:  %s:%d\n", versionLine(), o.ip, o.port)
	if srv.uiURL != "" {
		fmt.Printf("UI:      %s\n", srv.uiURL)
	}
	if o.jwksURL != "" {
		fmt.Printf("Auth:    JWT, keys from %s, permissions claim %q\n", o.jwksURL, o.permissionsClaim)
	}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	srv.stop()
	return nil
}
