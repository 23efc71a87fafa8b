// rulecheck validates Prometheus rule files the way `promtool check rules` does: it parses
// each file with Prometheus's own rule-file parser, which also parses every PromQL
// expression and checks labels, annotations and templates. It is a small program instead of
// promtool because promtool pulls in every service-discovery client and takes many minutes
// to build on a small machine.
//
// Usage: go run . FILE...
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: rulecheck FILE...")
		os.Exit(2)
	}
	failed := false
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// The same parser options as `promtool check rules` by default.
	p := parser.NewParser(parser.Options{})
	for _, file := range os.Args[1:] {
		groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, p, logger)
		if len(errs) > 0 {
			failed = true
			for _, err := range errs {
				fmt.Fprintf(os.Stderr, "%s: %v\n", file, err)
			}
			continue
		}
		rules := 0
		for _, g := range groups.Groups {
			rules += len(g.Rules)
		}
		fmt.Printf("%s: SUCCESS: %d rules found\n", file, rules)
	}
	if failed {
		os.Exit(1)
	}
}
