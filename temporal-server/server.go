package main

import (
	"fmt"
	"math/rand"
	"net"
	"os"
	"strconv"
	"time"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/metrics"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/components/nexusoperations"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

const clusterName = "active"

// running is a started server (and its UI), stopped together.
type running struct {
	server temporal.Server
	ui     interface{ Stop() }
	uiURL  string
}

func (r *running) stop() {
	if r.ui != nil {
		r.ui.Stop()
	}
	_ = r.server.Stop()
}

func start(o options) (*running, error) {
	if o.httpPort == 0 {
		p, err := freePort(o.ip)
		if err != nil {
			return nil, err
		}
		o.httpPort = p
	}
	logger := log.NewZapLogger(log.BuildZapLogger(log.Config{Level: o.logLevel, Format: "json"}))
	conf, err := serverConfig(o)
	if err != nil {
		return nil, err
	}
	services := []string{string(primitives.FrontendService), string(primitives.HistoryService), string(primitives.MatchingService), string(primitives.WorkerService)}
	hosts := map[primitives.ServiceName]static.Hosts{}
	for name, svc := range conf.Services {
		hosts[primitives.ServiceName(name)] = static.SingleLocalHost(net.JoinHostPort(o.ip, strconv.Itoa(svc.RPC.GRPCPort)))
	}
	if _, ok := conf.Services[string(primitives.InternalFrontendService)]; ok {
		services = append(services, string(primitives.InternalFrontendService))
	}

	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("claim mapper: %w", err)
	}
	server, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(services),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dynamicConfig(o)),
	)
	if err != nil {
		return nil, fmt.Errorf("creating the server: %w", err)
	}

	r := &running{server: server}
	if !o.headless {
		if o.uiPort == 0 {
			o.uiPort = min(o.port+1000, 65535)
		}
		ui, url, err := startUI(o)
		if err != nil {
			return nil, err
		}
		r.ui, r.uiURL = ui, url
	}
	if err := server.Start(); err != nil {
		if r.ui != nil {
			r.ui.Stop()
		}
		return nil, fmt.Errorf("starting the server: %w", err)
	}
	return r, nil
}

// dynamicConfig holds the dev server's defaults, then the command line's values over them.
func dynamicConfig(o options) dynamicconfig.StaticClient {
	dc := dynamicconfig.StaticClient{
		// As the CLI's dev server: a larger mutable-state cache, visibility RPS raised,
		// search attributes visible as soon as they are created (with the persistence
		// QPS raised to match), Nexus callbacks to this frontend over plain HTTP.
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8096,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key():      true,
		dynamicconfig.FrontendPersistenceMaxQPS.Key():                    10000,
		dynamicconfig.HistoryPersistenceMaxQPS.Key():                     45000,
		nexusoperations.CallbackURLTemplate.Key():                        fmt.Sprintf("http://%s/namespaces/{{.NamespaceName}}/nexus/callback", net.JoinHostPort(o.ip, strconv.Itoa(o.httpPort))),
		dynamicconfig.MakeKey("callback.allowedAddresses"):               []map[string]any{{"Pattern": net.JoinHostPort(o.ip, strconv.Itoa(o.httpPort)), "AllowInsecure": true}},
	}
	for k, v := range o.dynamicConfig {
		dc[dynamicconfig.MakeKey(k)] = v
	}
	return dc
}

func serverConfig(o options) (*config.Config, error) {
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = o.ip
	if o.metricsPort > 0 {
		conf.Global.Metrics = &metrics.Config{Prometheus: &metrics.PrometheusConfig{
			ListenAddress: net.JoinHostPort(o.ip, strconv.Itoa(o.metricsPort)),
			HandlerPath:   "/metrics",
		}}
	}
	if o.jwksURL != "" {
		conf.Global.Authorization = jwtAuthorization(o)
	}

	sqlConf, err := sqliteConfig(o)
	if err != nil {
		return nil, err
	}
	conf.Persistence.DefaultStore = "sqlite-default"
	conf.Persistence.VisibilityStore = "sqlite-default"
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite-default": {SQL: sqlConf}}

	frontend := net.JoinHostPort(o.ip, strconv.Itoa(o.port))
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{clusterName: {
			Enabled:                true,
			InitialFailoverVersion: 1,
			RPCAddress:             frontend,
			HTTPAddress:            net.JoinHostPort(o.ip, strconv.Itoa(o.httpPort)),
			// A new ID at every start, as the CLI does with a database file: the server keeps
			// the cluster metadata it stored first.
			ClusterID: primitives.NewUUID().String(),
		}},
	}
	conf.DCRedirectionPolicy.Policy = "noop"

	conf.Services = map[string]config.Service{}
	conf.Services[string(primitives.FrontendService)] = serviceOn(o.ip, o.port, o.httpPort)
	for _, name := range []primitives.ServiceName{primitives.HistoryService, primitives.MatchingService, primitives.WorkerService} {
		p, err := freePort(o.ip)
		if err != nil {
			return nil, err
		}
		conf.Services[string(name)] = serviceOn(o.ip, p, 0)
	}
	if o.jwksURL != "" {
		// The server's own system workers (deployments, schedules, batch...) carry no
		// token: they call an internal frontend that trusts them, and the public
		// frontend checks every caller. The server wants publicClient empty then.
		grpcPort, err := freePort(o.ip)
		if err != nil {
			return nil, err
		}
		httpPort, err := freePort(o.ip)
		if err != nil {
			return nil, err
		}
		conf.Services[string(primitives.InternalFrontendService)] = serviceOn(o.ip, grpcPort, httpPort)
	} else {
		conf.PublicClient.HostPort = frontend
	}

	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	return &conf, nil
}

func serviceOn(ip string, grpcPort, httpPort int) config.Service {
	var s config.Service
	s.RPC.BindOnIP = ip
	s.RPC.GRPCPort = grpcPort
	s.RPC.HTTPPort = httpPort
	return s
}

// sqliteConfig lays out the store: a new file gets the schema, and every listed
// namespace is created (an existing one is left as it is).
func sqliteConfig(o options) (*config.SQL, error) {
	sqlConf := config.SQL{PluginName: sqliteplugin.PluginName}
	if o.dbFile == "" {
		sqlConf.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		sqlConf.DatabaseName = strconv.Itoa(rand.Intn(9999999))
	} else {
		sqlConf.ConnectAttributes = map[string]string{"mode": "rwc"}
		sqlConf.DatabaseName = o.dbFile
		if _, err := os.Stat(o.dbFile); os.IsNotExist(err) {
			if err := sqliteschema.SetupSchema(&sqlConf); err != nil {
				return nil, fmt.Errorf("creating the schema in %s: %w", o.dbFile, err)
			}
		}
	}
	namespaces := make([]*sqliteschema.NamespaceConfig, 0, len(o.namespaces))
	for _, name := range o.namespaces {
		ns, err := sqliteschema.NewNamespaceConfig(clusterName, name, false, o.searchAttributes)
		if err != nil {
			return nil, fmt.Errorf("namespace %s: %w", name, err)
		}
		namespaces = append(namespaces, ns)
	}
	if err := sqliteschema.CreateNamespaces(&sqlConf, namespaces...); err != nil {
		return nil, fmt.Errorf("creating namespaces: %w", err)
	}
	return &sqlConf, nil
}

func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("finding a free port on %s: %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
