package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
)

// options is the parsed command line.
type options struct {
	ip               string
	port             int
	httpPort         int
	metricsPort      int
	uiPort           int
	headless         bool
	uiCodecEndpoint  string
	dbFile           string
	logLevel         string
	namespaces       []string
	searchAttributes map[string]enumspb.IndexedValueType
	dynamicConfig    map[string]any
	jwksURL          string
	permissionsClaim string
	audience         string
	jwksRefresh      time.Duration
}

func (o *options) validate() error {
	for name, port := range map[string]int{"--port": o.port, "--http-port": o.httpPort, "--metrics-port": o.metricsPort, "--ui-port": o.uiPort} {
		if port < 0 || port > 65535 {
			return fmt.Errorf("%s %d is not a port number (0-65535)", name, port)
		}
	}
	if o.port == 0 {
		return fmt.Errorf("--port must be given a port number, not 0")
	}
	switch o.logLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("--log-level %q is not one of debug, info, warn, error", o.logLevel)
	}
	if o.dbFile != "" {
		if _, err := os.Stat(filepath.Dir(o.dbFile)); err != nil {
			return fmt.Errorf("--db-filename %s: its folder cannot be used: %w", o.dbFile, err)
		}
	}
	for _, ns := range o.namespaces {
		if strings.TrimSpace(ns) == "" {
			return fmt.Errorf("--namespace must not be empty")
		}
	}
	if o.jwksURL != "" {
		u, err := url.Parse(o.jwksURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--jwks-url %q is not an http(s) URL", o.jwksURL)
		}
		if o.permissionsClaim == "" {
			return fmt.Errorf("--jwt-permissions-claim must not be empty")
		}
		if o.jwksRefresh <= 0 {
			return fmt.Errorf("--jwks-refresh-interval must be positive, e.g. 1m")
		}
	}
	return nil
}

// parseSearchAttributes reads NAME=TYPE pairs; TYPE is one of the server's shorthand
// names (Keyword, Text, Int, Double, Bool, Datetime, KeywordList), in any case.
func parseSearchAttributes(pairs []string) (map[string]enumspb.IndexedValueType, error) {
	out := make(map[string]enumspb.IndexedValueType, len(pairs))
	for _, pair := range pairs {
		name, typeName, ok := strings.Cut(pair, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--search-attribute %q: expected NAME=TYPE, e.g. SternaZone=Keyword", pair)
		}
		var found enumspb.IndexedValueType
		for shorthand, value := range enumspb.IndexedValueType_shorthandValue {
			if strings.EqualFold(shorthand, typeName) {
				found = enumspb.IndexedValueType(value)
			}
		}
		if found == enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED {
			return nil, fmt.Errorf("--search-attribute %q: unknown type %q (Keyword, Text, Int, Double, Bool, Datetime, KeywordList)", pair, typeName)
		}
		out[name] = found
	}
	return out, nil
}

// parseDynamicConfig reads KEY=JSON pairs. Whole JSON numbers become int, as the
// server's typed settings expect int rather than float64.
func parseDynamicConfig(pairs []string) (map[string]any, error) {
	out := make(map[string]any, len(pairs))
	for _, pair := range pairs {
		key, raw, ok := strings.Cut(pair, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("--dynamic-config-value %q: expected KEY=JSON, e.g. history.timerProcessorMaxTimeShift=\"10ms\"", pair)
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil || dec.More() {
			return nil, fmt.Errorf("--dynamic-config-value %q: the value is not one JSON value (strings need quotes)", pair)
		}
		if n, isNumber := v.(json.Number); isNumber {
			if i, err := n.Int64(); err == nil {
				v = int(i)
			} else if f, err := n.Float64(); err == nil {
				v = f
			}
		}
		out[key] = v
	}
	return out, nil
}
