// promlint reads a Prometheus text exposition (format 0.0.4) on stdin, parses it with the parser
// of the Prometheus Go libraries (github.com/prometheus/common/expfmt) and lints it with the
// client library's linter (testutil/promlint), for the tests that check Snooze's /metrics as a
// scraper reads it. hack/build-promlint.sh builds it.
//
// It prints one JSON object, {"families":{name:{"type","help","series"}},"problems":[{"metric","text"}]}
// where "series" lists each series' labels as parsed (unescaped), or {"error": "..."} with exit
// code 1 when the text does not parse.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

type family struct {
	Type   string              `json:"type"`
	Help   string              `json:"help"`
	Series []map[string]string `json:"series"`
}

type problem struct {
	Metric string `json:"metric"`
	Text   string `json:"text"`
}

type report struct {
	Families map[string]family `json:"families"`
	Problems []problem         `json:"problems"`
}

func fail(err error) {
	_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"error": err.Error()})
	os.Exit(1)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--version" {
		fmt.Println("promlint (client_golang testutil/promlint, common/expfmt)")
		return
	}
	body, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	// Legacy names only: what a Prometheus server that has not opted into UTF-8 names accepts.
	parser := expfmt.NewTextParser(model.LegacyValidation)
	parsed, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		fail(err)
	}
	names := make([]string, 0, len(parsed))
	for name := range parsed {
		names = append(names, name)
	}
	sort.Strings(names)
	out := report{Families: map[string]family{}, Problems: []problem{}}
	mfs := make([]*dto.MetricFamily, 0, len(names))
	for _, name := range names {
		mf := parsed[name]
		mfs = append(mfs, mf)
		series := make([]map[string]string, 0, len(mf.GetMetric()))
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, pair := range m.GetLabel() {
				labels[pair.GetName()] = pair.GetValue()
			}
			series = append(series, labels)
		}
		out.Families[name] = family{Type: mf.GetType().String(), Help: mf.GetHelp(), Series: series}
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		fail(err)
	}
	for _, p := range problems {
		out.Problems = append(out.Problems, problem{Metric: p.Metric, Text: p.Text})
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}
