package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// versionLine names the server and UI modules this binary was built from, read from
// its own build information so it cannot drift from go.mod.
func versionLine() string {
	server, ui := "unknown", "none"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			switch dep.Path {
			case "go.temporal.io/server":
				server = strings.TrimPrefix(dep.Version, "v")
			case "github.com/temporalio/ui-server/v2":
				ui = strings.TrimPrefix(dep.Version, "v")
			}
		}
	}
	return fmt.Sprintf("sterna-temporal-server (Server %s, UI %s, %s)", server, ui, runtime.Version())
}
