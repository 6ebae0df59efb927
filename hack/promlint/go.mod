// A linter for Snooze's /metrics: the Prometheus Go libraries' text parser and promlint; built by
// hack/build-promlint.sh.
module snooze.dev/hack/promlint

go 1.26.0

require (
	github.com/prometheus/client_golang v1.24.1
	github.com/prometheus/client_model v0.6.2
	github.com/prometheus/common v0.70.1
)

require (
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
