package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/server/flagz"
	"k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// runAPIServer runs kube-apiserver in this process until ctx is cancelled,
// then shuts it down gracefully and returns.
//
// It does what app.NewAPIServerCommand's RunE does, minus the cobra command:
// that command installs its own SIGTERM/SIGINT handler which exits the
// process on a second signal (os.Exit(1), skipping our clean-up of the state
// directory and kubeconfig). Here the caller owns signals and shutdown.
func runAPIServer(ctx context.Context, args []string) error {
	s := apiserveroptions.NewServerRunOptions()
	featureGate := s.GenericServerRunOptions.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)

	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	namedFlagSets := s.Flags()
	s.Flagz = flagz.NamedFlagSetsReader{FlagSets: namedFlagSets}
	for _, f := range namedFlagSets.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("kube-apiserver flags: %w", err)
	}

	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	// kube-apiserver's loopback clients should not log self-issued warnings.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	if err := logsapi.ValidateAndApply(s.Logs, featureGate); err != nil {
		return err
	}
	completed, err := s.Complete(ctx)
	if err != nil {
		return err
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return utilerrors.NewAggregate(errs)
	}
	featureGate.(featuregate.MutableFeatureGate).AddMetrics()
	s.GenericServerRunOptions.ComponentGlobalsRegistry.AddMetrics()
	return app.Run(ctx, completed)
}
