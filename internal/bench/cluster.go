package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/bubbus/bub/internal/freeport"
	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/jsretry"
)

// The cluster rows run P3 and P4 on a 3-node JetStream cluster: three
// nats-server processes on loopback (`bub bench --serve nats-node`), routed
// to each other, every stream, bucket and shared consumer at R3 — the
// pipeline's (BUB_REPLICAS=3) and the simulation's.

// clusterSize is the cluster rows' server count and replica count.
const clusterSize = 3

// RoleNATSNode is one server of the cluster rows.
const RoleNATSNode = "nats-node"

// nodeParams configure a nats-node.
type nodeParams struct {
	Name        string   `json:"name"`
	Dir         string   `json:"dir"`
	Port        int      `json:"port"`
	ClusterPort int      `json:"cluster_port"`
	Routes      []string `json:"routes"`
	// Sync is BUB_JS_SYNC ("" = the server's default).
	Sync string `json:"sync,omitempty"`
}

// serveNATSNode runs one clustered JetStream server until ctx ends.
func serveNATSNode(ctx context.Context, p nodeParams, ready func(url string)) error {
	interval, always, err := natsx.ParseSync(p.Sync)
	if err != nil {
		return err
	}
	opts := &server.Options{
		ServerName: p.Name, Host: "127.0.0.1", Port: p.Port,
		JetStream: true, StoreDir: p.Dir, NoSigs: true, NoLog: true,
		MaxPayload:   natsx.MaxPayload,
		SyncInterval: interval, SyncAlways: always,
		Cluster: server.ClusterOpts{Name: "bench", Host: "127.0.0.1", Port: p.ClusterPort},
		Routes:  server.RoutesFromStr(strings.Join(p.Routes, ",")),
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return errors.New("nats-node: not ready within 30s")
	}
	ready(s.ClientURL())
	<-ctx.Done()
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// startNATS starts the layout's NATS server process (`bub up
// --services=`), or the three nodes of a cluster, and returns the client
// URL (comma-separated for a cluster).
func (pl *pipeline) startNATS(ctx context.Context) (string, error) {
	e := pl.e
	if !pl.opts.cluster {
		env := []string{"BUB_NATS_URL="}
		if pl.opts.jsSync != "" {
			env = append(env, "BUB_JS_SYNC="+pl.opts.jsSync)
		}
		m, err := pl.child(ctx, lblServer, "nats-server (bub up --services=)", e.opts.Self,
			[]string{"up", "--services=", "--nats-listen", "127.0.0.1:0", "--home", filepath.Join(pl.dir, "nats")},
			env, regexp.MustCompile(`bub up: nats (nats://\S+)`))
		if err != nil {
			return "", err
		}
		return m[1], nil
	}
	ports, err := freeport.Ports(2 * clusterSize)
	if err != nil {
		return "", err
	}
	var routes []string
	for i := range clusterSize {
		routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(ports[clusterSize+i]))
	}
	var urls []string
	for i := range clusterSize {
		p := nodeParams{Name: "n" + strconv.Itoa(i+1), Dir: filepath.Join(pl.dir, "nats-n"+strconv.Itoa(i+1)),
			Port: ports[i], ClusterPort: ports[clusterSize+i], Routes: routes, Sync: pl.opts.jsSync}
		params, _ := json.Marshal(p)
		m, err := pl.child(ctx, lblServer, "nats-node "+p.Name, e.opts.Self,
			[]string{"bench", "--serve", RoleNATSNode, "--params", string(params)}, nil,
			regexp.MustCompile(`bench\.ready.*url=(\S+)`))
		if err != nil {
			return "", err
		}
		urls = append(urls, m[1])
	}
	url := strings.Join(urls, ",")
	return url, waitJetStream(ctx, url)
}

// waitJetStream waits until the cluster at url answers JetStream requests
// (a meta leader is elected).
func waitJetStream(ctx context.Context, url string) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// Until a meta leader is elected the API times out, has no responders
	// or answers 503: jsretry's transient errors.
	err = jsretry.Backoff{First: 100 * time.Millisecond, Max: time.Second}.Do(ctx, time.Now().Add(startTimeout), nil, func(ctx context.Context) error {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := js.AccountInfo(attempt)
		return err
	})
	if err != nil {
		return fmt.Errorf("the cluster at %s elected no JetStream meta leader within %s (%v)", url, startTimeout, err)
	}
	return nil
}
