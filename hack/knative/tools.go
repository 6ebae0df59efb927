//go:build tools

// Package tools pins Knative Serving's commands in this module's build list, so `go mod tidy` keeps
// every module they need and hack/build-knative.sh can build them by import path.
package tools

import (
	_ "knative.dev/serving/cmd/autoscaler"
	_ "knative.dev/serving/cmd/controller"
	_ "knative.dev/serving/cmd/queue"
	_ "knative.dev/serving/cmd/webhook"
)
