// Command specgen writes package amqp's spec_gen.go from the AMQP 0-9-1 spec in RabbitMQ's
// JSON form. From the repository root:
//
//	go run ./amqp/internal/specgen -spec amqp/internal/specgen/spec/amqp-rabbitmq-0.9.1.json -out amqp/wire/spec_gen.go
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/warrenmq/warren/amqp/internal/specgen/gen"
)

func main() {
	specPath := flag.String("spec", "", "path of amqp-rabbitmq-0.9.1.json")
	outPath := flag.String("out", "", "path of the Go file to write")
	flag.Parse()
	if *specPath == "" || *outPath == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*specPath, *outPath); err != nil {
		fmt.Fprintln(os.Stderr, "specgen:", err)
		os.Exit(1)
	}
}

func run(specPath, outPath string) error {
	spec, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	src, err := gen.Generate(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(outPath, src, 0o644)
}
