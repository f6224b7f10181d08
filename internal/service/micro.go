package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/bubbus/bub/internal/cli"
	"github.com/bubbus/bub/internal/status"
	"github.com/bubbus/bub/pkg/subjects"
)

// announcement is the micro service of a Conn and its status.
type announcement struct {
	nc     *nats.Conn
	svc    micro.Service
	status status.ServiceStatus
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

// announceFlushTimeout bounds Announce's wait for the NATS server.
const announceFlushTimeout = 10 * time.Second

// Announce registers the NATS micro service of service's instance on c:
// name <prefix>-<service> (subjects.Names.Service), the build's version,
// metadata naming the service, instance and prefix, and a status endpoint
// on the instance's own subject (subjects.Names.ServiceStatus) in a queue
// group of its own (<name>-<instance>), so each instance is reachable
// alone. NATS micro adds PING, INFO and STATS; the status endpoint's data
// in STATS is the instance's [status.ServiceStatus] too. `nats micro ls`
// then lists it and `bub status` finds it, from any connection, once
// Announce returns (it waits until the server has the subscriptions).
// [Conn.Close] stops it before draining. A Conn announces at most once.
func (c *Conn) Announce(service, instance string) error {
	if c.micro != nil {
		return fmt.Errorf("service %s: already announced as %s", service, c.micro.status.Service)
	}
	build := cli.Version()
	a := &announcement{nc: c.NC, status: status.ServiceStatus{Service: service, Instance: instance, Version: build, Started: time.Now().UTC()}}
	svc, err := micro.AddService(c.NC, micro.Config{
		Name:        c.Names.Service(service),
		Version:     MicroVersion(build),
		Description: "Bub " + service,
		Metadata: map[string]string{
			status.MetadataService: service, status.MetadataInstance: instance,
			status.MetadataPrefix: c.Names.Prefix(), status.MetadataBuild: build,
		},
		StatsHandler: func(*micro.Endpoint) any { return a.current() },
	})
	if err != nil {
		return fmt.Errorf("service %s: NATS micro: %w", service, err)
	}
	err = svc.AddEndpoint(status.Endpoint, micro.HandlerFunc(a.answer),
		micro.WithEndpointSubject(c.Names.ServiceStatus(service, instance)),
		micro.WithEndpointQueueGroup(c.Names.Service(service)+"-"+subjects.Token(instance)))
	if err != nil {
		return errors.Join(fmt.Errorf("service %s: status endpoint: %w", service, err), svc.Stop())
	}
	// Discoverable from any connection once Announce returns.
	if err := c.NC.FlushTimeout(announceFlushTimeout); err != nil {
		return errors.Join(fmt.Errorf("service %s: NATS micro subscriptions: %w", service, err), svc.Stop())
	}
	a.svc = svc
	c.micro = a
	return nil
}

// ReportStatus sets the function whose result (encoded as JSON) is the
// Details of the announced service's [status.ServiceStatus]; it is called
// for every status and STATS request, concurrently with the service.
// Without an announcement it does nothing.
func (c *Conn) ReportStatus(report func() any) {
	if c.micro == nil {
		return
	}
	c.micro.mu.Lock()
	c.micro.report = report
	c.micro.mu.Unlock()
}

// current returns the status now.
func (a *announcement) current() status.ServiceStatus {
	st := a.status
	st.MaxPayload = a.nc.MaxPayload()
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
