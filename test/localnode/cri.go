package localnode

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// stopAllSandboxes stops and removes every pod sandbox through the CRI, so
// containerd runs the CNI DEL (veth, IP allocation), unmounts the rootfs
// and ends the shims and containers the way kubelet would.
func stopAllSandboxes(ctx context.Context, sock string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to containerd: %w", err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	for _, sb := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			return fmt.Errorf("stop sandbox %s/%s: %w", sb.Metadata.GetNamespace(), sb.Metadata.GetName(), err)
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			return fmt.Errorf("remove sandbox %s/%s: %w", sb.Metadata.GetNamespace(), sb.Metadata.GetName(), err)
		}
	}
	return nil
}
