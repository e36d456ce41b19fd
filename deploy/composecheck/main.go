// Command composecheck loads a Compose file the way `docker compose config`
// does and prints the resulting project as JSON.
//
// It exists because no container engine (and no compose plugin) is installed
// on the machines that run kplug's tests, and `docker compose config` needs
// the plugin. This uses compose-go, the library docker compose itself loads
// files with: the same JSON-schema validation (compose-spec), interpolation,
// normalization and consistency checks (every depends_on, network_mode
// service, volume and network reference must resolve). Every profile is
// enabled, so services behind a profile are checked too.
//
// Usage: composecheck FILE   (exit 1 with the loader's message on error)
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: composecheck FILE")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "composecheck: %v\n", err)
		os.Exit(1)
	}
}

func run(file string) error {
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	options, err := cli.NewProjectOptions(
		[]string{abs},
		cli.WithWorkingDirectory(filepath.Dir(abs)),
		// No OS environment and no .env file: the result must not depend on
		// the shell the tests run in (compose.yaml uses no variables).
		cli.WithEnv(nil),
		cli.WithProfiles([]string{"*"}),
		cli.WithConsistency(true),
	)
	if err != nil {
		return err
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		return err
	}
	out, err := project.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = fmt.Printf("%s\n", out)
	return err
}
