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
// containers stop, the CNI plugins release the pod's address, the pod's
// network namespace is removed and its shim exits (removing its socket).
// Stopping containerd alone would leave the namespaces, the veth pairs, the
// IPAM records and the shims behind.
//
// The kubelet has just been stopped, but a CRI call it made may still be
// running in containerd: its container garbage collection removing an old
// pod's container, say. A removal then fails at once with "failed to set
// removing state for container ... already in removing state", and a single
// pass would leave that pod's sandbox, and its shim, behind (seen on a busy
// machine). So the pass is repeated, every container first stopped and
// removed on its own, until no sandbox is left or the context ends; the
// error is that of the last pass. retried is the first error of a pass that
// a later one got past: what the clean-up met, for its log.
func removePodSandboxes(ctx context.Context, socket string) (count int, retried error, err error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, nil, fmt.Errorf("connecting to containerd at %s: %w", socket, err)
	}
	defer conn.Close()
	runtime := runtimeapi.NewRuntimeServiceClient(conn)
	removed := map[string]bool{}
	for {
		list, err := listSandboxes(ctx, runtime)
		if err != nil {
			return len(removed), retried, err
		}
		if len(list) == 0 {
			return len(removed), retried, nil
		}
		var errs []error
		for _, sandbox := range list {
			if err := removeSandbox(ctx, runtime, sandbox); err != nil {
				errs = append(errs, err)
			} else {
				removed[sandbox.Id] = true
			}
		}
		if len(errs) == 0 {
			continue // list again: nothing may have been created meanwhile
		}
		select {
		case <-ctx.Done():
			return len(removed), nil, errors.Join(errs...)
		case <-time.After(250 * time.Millisecond):
		}
		if retried == nil {
			retried = errors.Join(errs...)
		}
	}
}

func listSandboxes(ctx context.Context, runtime runtimeapi.RuntimeServiceClient) ([]*runtimeapi.PodSandbox, error) {
	listCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := runtime.ListPodSandbox(listCtx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing pod sandboxes: %w", err)
	}
	return list.Items, nil
}

// removeSandbox stops a pod's sandbox, stops and removes each of its
// containers, then removes the sandbox.
func removeSandbox(ctx context.Context, runtime runtimeapi.RuntimeServiceClient, sandbox *runtimeapi.PodSandbox) error {
	name := sandbox.GetMetadata().GetNamespace() + "/" + sandbox.GetMetadata().GetName()
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := runtime.StopPodSandbox(callCtx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil {
		return fmt.Errorf("stopping the sandbox of pod %s: %w", name, err)
	}
	containers, err := runtime.ListContainers(callCtx, &runtimeapi.ListContainersRequest{
		Filter: &runtimeapi.ContainerFilter{PodSandboxId: sandbox.Id},
	})
	if err != nil {
		return fmt.Errorf("listing the containers of pod %s: %w", name, err)
	}
	for _, c := range containers.Containers {
		if _, err := runtime.StopContainer(callCtx, &runtimeapi.StopContainerRequest{ContainerId: c.Id}); err != nil {
			return fmt.Errorf("stopping container %s of pod %s: %w", c.GetMetadata().GetName(), name, err)
		}
		if _, err := runtime.RemoveContainer(callCtx, &runtimeapi.RemoveContainerRequest{ContainerId: c.Id}); err != nil {
			return fmt.Errorf("removing container %s of pod %s: %w", c.GetMetadata().GetName(), name, err)
		}
	}
	if _, err := runtime.RemovePodSandbox(callCtx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil {
		return fmt.Errorf("removing the sandbox of pod %s: %w", name, err)
	}
	return nil
}
