package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// removePodSandboxes stops and removes every pod sandbox of the node's
// containerd through the CRI, as the kubelet would when a pod goes away: the
// containers stop, the CNI plugins release the pod's address and its
// network namespace is removed. Stopping containerd alone would leave the
// namespaces, the veth pairs, the IPAM records and the shims behind.
func removePodSandboxes(ctx context.Context, socket string) (int, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, fmt.Errorf("connecting to containerd at %s: %w", socket, err)
	}
	defer conn.Close()
	runtime := runtimeapi.NewRuntimeServiceClient(conn)
	listCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := runtime.ListPodSandbox(listCtx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return 0, fmt.Errorf("listing pod sandboxes: %w", err)
	}
	var errs []error
	for _, sandbox := range list.Items {
		name := sandbox.GetMetadata().GetNamespace() + "/" + sandbox.GetMetadata().GetName()
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if _, err := runtime.StopPodSandbox(callCtx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stopping the sandbox of pod %s: %w", name, err))
		} else if _, err := runtime.RemovePodSandbox(callCtx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing the sandbox of pod %s: %w", name, err))
		}
		cancel()
	}
	return len(list.Items), errors.Join(errs...)
}
