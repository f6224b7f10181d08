// Package compose is the end-to-end test of the docker compose cluster
// (deploy/compose.yaml): `make e2e-compose` builds the images (the Bub
// image and a local NATS image from the pinned nats-server module), brings
// the cluster up under a throw-away project name, sends 100 messages over
// HTTP to three workers, kills one of them mid-load, checks that every
// message is answered and the load was shared, prints a summary and tears
// everything down (compose down -v).
//
// TestComposeClusterFaults (`make e2e-cluster`) does the same with the
// cluster profile (three NATS servers, R3 streams): it checks NATS micro
// discovery of every service, then runs four fault scenarios under load
// (internal/turnload: BUB_CLUSTER_TURNS over BUB_CLUSTER_SESSIONS each) —
// stream leaders killed, a server partitioned, a rolling restart through
// lame duck, a server's volume lost — each printing its summary line and
// failing on any lost or duplicated reply or tape entry.
//
// The test is behind the "compose" build tag: it needs a Docker engine
// and compose (the docker compose plugin or docker-compose v1, whichever
// exists) and the images, so `go test ./...` does not build it. Variables:
// BUB_IMAGE and NATS_IMAGE (the images), BUB_BIN_DIR (a directory with a
// bub binary for `bub status` and `bub events tail`).
package compose
