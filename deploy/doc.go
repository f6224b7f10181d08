// Package deploy holds the docker compose deployment of Bub: compose.yaml
// (NATS, ingress, three workers, the recorder, the example policy
// interceptor, optional Jaeger), the NATS server configuration with one
// user per role (nats/nats-server.conf), the scratch Dockerfiles of the
// service image and of a locally built NATS image, and README.md.
//
// It has no Go code of its own; its test runs every service in process
// under its NATS user from nats/nats-server.conf, so a permission the
// services need but the configuration lacks fails `go test` rather than
// the cluster. The cluster itself is tested by e2e/compose
// (`make e2e-compose`).
package deploy
