package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/pkg/subjects"
)

// NATS micro metadata keys of a Bub service (see [Conn.Announce]).
const (
	// MetadataService is the service (worker, ingress, recorder, gateway).
	MetadataService = "dev.bub.service"
	// MetadataInstance is the instance (BUB_INSTANCE), which also names
	// the instance in CloudEvent sources and the turn registry.
	MetadataInstance = "dev.bub.instance"
	// MetadataPrefix is the deployment's subject prefix (BUB_PREFIX).
	MetadataPrefix = "dev.bub.prefix"
	// MetadataBuild is the build's module version as `bub` reports it
	// ([cli.Version]); the micro version is its semantic form.
	MetadataBuild = "dev.bub.build"
)

// StatusEndpoint is the name of the status endpoint of a Bub service.
const StatusEndpoint = "status"

// Status is what the status endpoint of a service instance answers, and
// the data of that endpoint in the instance's $SRV.STATS reply.
type Status struct {
	Service  string    `json:"service"`
	Instance string    `json:"instance"`
	Version  string    `json:"version"`
	Started  time.Time `json:"started"`
	// Details are the service's own figures ([Conn.ReportStatus]), absent
	// until it reports them.
	Details json.RawMessage `json:"details,omitempty"`
}

// announcement is the micro service of a Conn and its status.
type announcement struct {
	svc    micro.Service
	status Status
	mu     sync.Mutex
	report func() any
}

// MicroVersion is the semantic version NATS micro requires of a build
// version v as [cli.Version] reports it: a module version without its
// "v" (v1.2.3 → 1.2.3, pseudo-versions included), 0.0.0-devel for a
// local build.
func MicroVersion(v string) string {
	if s, ok := strings.CutPrefix(v, "v"); ok && s != "" {
		return s
	}
	return "0.0.0-devel"
}

// Announce registers the NATS micro service of service's instance on c:
// name <prefix>-<service> (subjects.Names.Service), the build's version,
// metadata naming the service, instance and prefix, and a status endpoint
// on subjects.Names.ServiceStatus, its own subject, in a queue group of
// its own (<name>-<instance>), so each instance is reachable alone; NATS micro adds PING, INFO and
// STATS, whose status-endpoint data is the instance's [Status]. `nats
// micro ls` then lists it, and `bub status` finds it. [Conn.Close] stops
// it before draining. A Conn announces at most once.
func (c *Conn) Announce(service, instance string) error {
	if c.micro != nil {
		return fmt.Errorf("service %s: already announced as %s", service, c.micro.status.Service)
	}
	build := cli.Version()
	a := &announcement{status: Status{Service: service, Instance: instance, Version: build, Started: time.Now().UTC()}}
	svc, err := micro.AddService(c.NC, micro.Config{
		Name:        c.Names.Service(service),
		Version:     MicroVersion(build),
		Description: "Bub " + service,
		Metadata: map[string]string{
			MetadataService: service, MetadataInstance: instance,
			MetadataPrefix: c.Names.Prefix(), MetadataBuild: build,
		},
		StatsHandler: func(*micro.Endpoint) any { return a.current() },
	})
	if err != nil {
		return fmt.Errorf("service %s: NATS micro: %w", service, err)
	}
	err = svc.AddEndpoint(StatusEndpoint, micro.HandlerFunc(a.answer),
		micro.WithEndpointSubject(c.Names.ServiceStatus(service, instance)),
		micro.WithEndpointQueueGroup(c.Names.Service(service)+"-"+subjects.Token(instance)))
	if err != nil {
		return errors.Join(fmt.Errorf("service %s: status endpoint: %w", service, err), svc.Stop())
	}
	a.svc = svc
	c.micro = a
	return nil
}

// ReportStatus sets the function whose result (encoded as JSON) is the
// Details of the announced service's [Status]; it is called for every
// status request, concurrently with the service. Without an announcement
// it does nothing.
func (c *Conn) ReportStatus(report func() any) {
	if c.micro == nil {
		return
	}
	c.micro.mu.Lock()
	c.micro.report = report
	c.micro.mu.Unlock()
}

// current returns the status now.
func (a *announcement) current() Status {
	st := a.status
	a.mu.Lock()
	report := a.report
	a.mu.Unlock()
	if report != nil {
		if d, err := json.Marshal(report()); err == nil {
			st.Details = d
		} else {
			st.Details, _ = json.Marshal(map[string]string{"error": err.Error()})
		}
	}
	return st
}

// answer replies to a status request.
func (a *announcement) answer(req micro.Request) {
	_ = req.RespondJSON(a.current()) // a requester gone is nobody's loss
}

// stopAnnouncement stops the micro service (its subscriptions end).
func (c *Conn) stopAnnouncement() {
	if c.micro != nil {
		_ = c.micro.svc.Stop()
	}
}
