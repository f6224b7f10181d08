package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/bubbus/bub/internal/natsx"
	"github.com/bubbus/bub/pkg/config"
	"github.com/bubbus/bub/pkg/subjects"
)

// Getenv reads an environment variable (os.Getenv in production, a map in
// tests).
type Getenv func(string) string

// Common are the settings of every command.
type Common struct {
	// Home is the bub home directory (BUB_HOME, default ~/.bub): embedded
	// NATS data, archives.
	Home string
	// Prefix is the root of every NATS name (BUB_PREFIX, default "bub").
	Prefix string
	// NATS says how to reach an existing cluster; an empty URL means the
	// embedded server (only commands that can start one accept that).
	NATS natsx.ClientConfig
	// LogLevel is debug, info, warn or error (BUB_LOG_LEVEL, info).
	LogLevel string
	// LogFormat is text or json (BUB_LOG_FORMAT, text).
	LogFormat string
	// MetricsAddr, when set, serves Prometheus /metrics and /healthz
	// (BUB_METRICS_ADDR, e.g. ":9464"); see internal/telemetry.
	MetricsAddr string
	// Quiet makes warn the default log level (interactive commands, whose
	// output is for people); services log info by default.
	Quiet bool
	// Topology sizes streams and consumers; every process of a deployment
	// must agree, so it comes from the environment only: BUB_ACK_WAIT
	// (worker ack wait), BUB_MAX_DELIVER, BUB_TURN_TTL (turn registry),
	// BUB_RECORDER_ACK_WAIT, BUB_REPLICAS, BUB_PLACEMENT_CLUSTER,
	// BUB_PLACEMENT_TAGS, BUB_PROVISION; --replicas and --no-provision
	// where [Common.BindTopology] added them. Filled in by Validate.
	Topology natsx.Topology
	// JSSync is the JetStream sync interval of an embedded server
	// (BUB_JS_SYNC: "always" or a duration; empty = the server's 2m), see
	// natsx.ParseSync.
	JSSync string
	// JSDomain is the JetStream domain every JetStream context uses
	// (BUB_JS_DOMAIN, --js-domain; empty = the local one): set it on a
	// leaf node whose streams and buckets live in a hub's domain.
	JSDomain string

	replicas      int
	noProvision   bool
	topologyFlags bool

	getenv Getenv
}

// EnvOr returns getenv(key) when set, else def.
func EnvOr(getenv Getenv, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// Bind registers the common flags on fs with defaults taken from getenv,
// so a flag beats BUB_* which beats the built-in default (Main's getenv
// also answers from the config file, between the two).
func (c *Common) Bind(fs *pflag.FlagSet, getenv Getenv) {
	c.getenv = getenv
	fs.StringVar(&c.Home, "home", config.DefaultHome(getenv), "bub home directory (env BUB_HOME)")
	fs.StringVar(&c.Prefix, "prefix", EnvOr(getenv, "BUB_PREFIX", subjects.DefaultPrefix), "root of every NATS subject, stream and bucket name (env BUB_PREFIX)")
	fs.StringVar(&c.NATS.URL, "nats", getenv("BUB_NATS_URL"), "NATS URL of an existing cluster; empty = embedded server (env BUB_NATS_URL)")
	fs.StringVar(&c.NATS.CredsFile, "nats-creds", getenv("BUB_NATS_CREDS"), "NATS credentials file (env BUB_NATS_CREDS)")
	fs.StringVar(&c.NATS.NKeyFile, "nats-nkey", getenv("BUB_NATS_NKEY"), "NATS nkey seed file (env BUB_NATS_NKEY)")
	fs.StringVar(&c.NATS.User, "nats-user", getenv("BUB_NATS_USER"), "NATS user (env BUB_NATS_USER)")
	fs.StringVar(&c.NATS.Password, "nats-password", getenv("BUB_NATS_PASSWORD"), "NATS password (env BUB_NATS_PASSWORD)")
	fs.StringVar(&c.NATS.Token, "nats-token", getenv("BUB_NATS_TOKEN"), "NATS token (env BUB_NATS_TOKEN)")
	fs.StringVar(&c.NATS.TLSCert, "nats-tls-cert", getenv("BUB_NATS_TLS_CERT"), "client TLS certificate (env BUB_NATS_TLS_CERT)")
	fs.StringVar(&c.NATS.TLSKey, "nats-tls-key", getenv("BUB_NATS_TLS_KEY"), "client TLS key (env BUB_NATS_TLS_KEY)")
	fs.StringVar(&c.NATS.TLSCA, "nats-tls-ca", getenv("BUB_NATS_TLS_CA"), "CA to trust for NATS TLS (env BUB_NATS_TLS_CA)")
	level := "info"
	if c.Quiet {
		level = "warn"
	}
	fs.StringVar(&c.LogLevel, "log-level", EnvOr(getenv, "BUB_LOG_LEVEL", level), "debug, info, warn or error (env BUB_LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", EnvOr(getenv, "BUB_LOG_FORMAT", "text"), "text or json (env BUB_LOG_FORMAT)")
	c.JSSync = getenv("BUB_JS_SYNC")
	fs.StringVar(&c.JSDomain, "js-domain", getenv("BUB_JS_DOMAIN"), "JetStream domain of the streams and buckets, for services on a leaf node of a hub that holds them (env BUB_JS_DOMAIN)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", getenv("BUB_METRICS_ADDR"), "serve Prometheus /metrics and /healthz on this address, e.g. :9464 (env BUB_METRICS_ADDR)")
}

// BindTopology registers the flags of the commands that create the
// topology (the services, bub up, bub run, bub provision): --replicas and
// --no-provision, with defaults from BUB_REPLICAS and BUB_PROVISION.
func (c *Common) BindTopology(fs *pflag.FlagSet, getenv Getenv) {
	c.topologyFlags = true
	replicas, _ := strconv.Atoi(getenv("BUB_REPLICAS")) // Validate reports a bad value
	provision, err := strconv.ParseBool(EnvOr(getenv, "BUB_PROVISION", "true"))
	fs.IntVar(&c.replicas, "replicas", replicas, "replicas of every stream, bucket and shared consumer: 1, 3 or 5 (env BUB_REPLICAS, default 1)")
	fs.BoolVar(&c.noProvision, "no-provision", err == nil && !provision, "create and update no stream, bucket or consumer; check that they exist with compatible settings (see bub provision; env BUB_PROVISION=false)")
}

// Validate reports unusable settings.
func (c *Common) Validate() error {
	var errs []error
	if _, err := subjects.New(c.Prefix); err != nil {
		errs = append(errs, err)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log format %q: want text or json", c.LogFormat))
	}
	if c.Home == "" {
		errs = append(errs, errors.New("home directory is unknown: set --home or BUB_HOME"))
	}
	if c.getenv != nil {
		t, err := TopologyFromEnv(c.getenv)
		if c.topologyFlags {
			t.Replicas, t.NoProvision = c.replicas, c.noProvision
			if verr := t.Validate(); verr != nil && err == nil {
				err = verr
			}
		}
		c.Topology = t
		errs = append(errs, err)
		if v := c.getenv("BUB_SHUTDOWN_GRACE"); v != "" {
			_, err := positiveDuration("BUB_SHUTDOWN_GRACE", v)
			errs = append(errs, err)
		}
	}
	if _, _, err := natsx.ParseSync(c.JSSync); err != nil {
		errs = append(errs, fmt.Errorf("BUB_JS_SYNC: %w", err))
	}
	if strings.ContainsAny(c.JSDomain, ".*> \t\r\n") {
		errs = append(errs, fmt.Errorf("BUB_JS_DOMAIN=%q: a JetStream domain is one subject token (no '.', '*', '>' or spaces)", c.JSDomain))
	}
	return errors.Join(errs...)
}

// Names returns the NATS names of the configured prefix.
func (c *Common) Names() subjects.Names {
	n, err := subjects.New(c.Prefix)
	if err != nil {
		return subjects.Default()
	}
	return n
}

// Logger returns the slog logger writing to w.
func (c *Common) Logger(w io.Writer) *slog.Logger {
	lvl, _ := parseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: lvl}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// TopologyFromEnv reads the topology settings every process of a
// deployment must share: BUB_ACK_WAIT, BUB_MAX_DELIVER, BUB_TURN_TTL,
// BUB_RECORDER_ACK_WAIT, BUB_REPLICAS, BUB_PLACEMENT_CLUSTER,
// BUB_PLACEMENT_TAGS and BUB_PROVISION (unset = the documented defaults).
func TopologyFromEnv(getenv Getenv) (natsx.Topology, error) {
	var t natsx.Topology
	var errs []error
	dur := func(key string, d *time.Duration) {
		if v := getenv(key); v != "" {
			p, err := positiveDuration(key, v)
			if err != nil {
				errs = append(errs, err)
				return
			}
			*d = p
		}
	}
	dur("BUB_ACK_WAIT", &t.WorkerAckWait)
	dur("BUB_TURN_TTL", &t.TurnTTL)
	dur("BUB_RECORDER_ACK_WAIT", &t.RecorderAckWait)
	if v := getenv("BUB_MAX_DELIVER"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("BUB_MAX_DELIVER=%q: want a positive number", v))
		}
		t.WorkerMaxDeliver = n
	}
	if v := getenv("BUB_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || (n != 1 && n != 3 && n != 5) {
			errs = append(errs, fmt.Errorf("BUB_REPLICAS=%q: want 1, 3 or 5", v))
		}
		t.Replicas = n
	}
	if v := getenv("BUB_PROVISION"); v != "" {
		p, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("BUB_PROVISION=%q: want true or false", v))
		}
		t.NoProvision = err == nil && !p
	}
	cluster, tags := getenv("BUB_PLACEMENT_CLUSTER"), getenv("BUB_PLACEMENT_TAGS")
	if cluster != "" || tags != "" {
		tt, err := natsx.ParseTags(tags)
		if err != nil {
			errs = append(errs, fmt.Errorf("BUB_PLACEMENT_TAGS: %w", err))
		}
		t.Placement = &jetstream.Placement{Cluster: cluster, Tags: tt}
	}
	return t, errors.Join(errs...)
}

// DurationFromEnv returns the duration in getenv(key), def when unset or
// invalid (Common.Validate refuses an invalid BUB_SHUTDOWN_GRACE).
func DurationFromEnv(getenv Getenv, key string, def time.Duration) time.Duration {
	if v := getenv(key); v != "" {
		if d, err := positiveDuration(key, v); err == nil {
			return d
		}
	}
	return def
}

// positiveDuration parses v, the value of key: a duration above 0.
func positiveDuration(key, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 30s", key, v)
	}
	return d, nil
}
