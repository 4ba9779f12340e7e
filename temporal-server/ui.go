package main

import (
	"fmt"
	"net"
	"os"
	"strconv"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// startUI serves Temporal's web UI (its assets are embedded in the ui-server module),
// talking to the frontend over gRPC. In JWT mode it forwards the browser's
// Authorization header, so a page without a token sees nothing it may not.
func startUI(o options) (*uiserver.Server, string, error) {
	addr := net.JoinHostPort(o.ip, strconv.Itoa(o.uiPort))
	// Start blocks and reports a taken port only from its goroutine: check first.
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("web UI port %d cannot be used (%v): pick another with --ui-port, or --headless", o.uiPort, err)
	}
	_ = l.Close()
	ui := uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                o.ip,
		Port:                o.uiPort,
		TemporalGRPCAddress: net.JoinHostPort(o.ip, strconv.Itoa(o.port)),
		EnableUI:            true,
		Codec:               uiconfig.Codec{Endpoint: o.uiCodecEndpoint},
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
	}))
	go func() {
		if err := ui.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "sterna-temporal-server: web UI stopped: %v\n", err)
			os.Exit(1)
		}
	}()
	return ui, "http://" + addr, nil
}
