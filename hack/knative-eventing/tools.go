//go:build tools

// Package tools pins Knative Eventing's commands (control plane, PingSource adapter, Broker data plane) in this module's build list, so `go mod tidy` keeps
// every module they need and hack/build-knative-eventing.sh can build them by import path.
package tools

import (
	_ "knative.dev/eventing/cmd/broker/filter"
	_ "knative.dev/eventing/cmd/broker/ingress"
	_ "knative.dev/eventing/cmd/controller"
	_ "knative.dev/eventing/cmd/in_memory/channel_controller"
	_ "knative.dev/eventing/cmd/in_memory/channel_dispatcher"
	_ "knative.dev/eventing/cmd/mtchannel_broker"
	_ "knative.dev/eventing/cmd/mtping"
	_ "knative.dev/eventing/cmd/webhook"
)
