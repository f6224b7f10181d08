package status

import (
	"encoding/json"
	"time"
)

// NATS micro metadata keys of a Bub service (internal/service,
// Conn.Announce).
const (
	// MetadataService is the service (worker, ingress, recorder, gateway).
	MetadataService = "dev.bub.service"
	// MetadataInstance is the instance (BUB_INSTANCE), which also names
	// the instance in CloudEvent sources and the turn registry.
	MetadataInstance = "dev.bub.instance"
	// MetadataPrefix is the deployment's subject prefix (BUB_PREFIX).
	MetadataPrefix = "dev.bub.prefix"
	// MetadataBuild is the build's module version as `bub` reports it
	// (cli.Version); the micro version is its semantic form.
	MetadataBuild = "dev.bub.build"
)

// Endpoint is the name of the status endpoint of a Bub service, on
// subjects.Names.ServiceStatus.
const Endpoint = "status"

// ServiceStatus is what the status endpoint of a service instance
// answers, and the data of that endpoint in the instance's $SRV.STATS
// reply.
type ServiceStatus struct {
	Service  string    `json:"service"`
	Instance string    `json:"instance"`
	Version  string    `json:"version"`
	Started  time.Time `json:"started"`
	// MaxPayload is the largest message the instance's NATS connection
	// sends: the max_payload of the server it last connected to, as that
	// server said when the connection was made (a client does not learn
	// of a change the server takes on a configuration reload).
	MaxPayload int64 `json:"max_payload,omitempty"`
	// Details are the service's own figures (service.Conn.ReportStatus,
	// e.g. a worker's [WorkerLoad]), absent until it reports them.
	Details json.RawMessage `json:"details,omitempty"`
}
