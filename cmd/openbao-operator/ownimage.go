package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
)

// pinnedImage names image by a digest: image itself when it carries one
// (the chart's image.digest, a CSV's relatedImages), else its repository
// at the digest of imageID, the manager container's status.imageID, when
// that is a repository digest (repo@sha256:..., as containerd and CRI-O
// report an image pulled from a registry). ok is false when neither pins
// it: an image loaded onto the node by hand has only its local ID.
func pinnedImage(image, imageID string) (pinned string, ok bool) {
	if ref, err := name.ParseReference(image); err == nil {
		if _, isDigest := ref.(name.Digest); isDigest {
			return image, true
		}
	}
	id := imageID // docker-pullable://repo@digest too: only the digest is read
	at := strings.LastIndex(id, "@")
	if at < 0 {
		return image, false
	}
	digest, err := name.NewDigest("example.invalid/x" + id[at:])
	if err != nil {
		return image, false
	}
	tagged, err := name.ParseReference(image)
	if err != nil {
		return image, false
	}
	return tagged.Context().Name() + "@" + digest.DigestStr(), true
}

// executorImage is the image the backup and restore executor runs unless
// a cluster names its own: the operator's own, pinned by the digest its
// pod runs, so that a tag moved in the registry changes no executor. It
// waits briefly for the kubelet to report the manager container's image
// ID; unpinned, it warns and runs the image by its tag.
func executorImage(cfg *rest.Config, namespace, podName, image string) string {
	if pinned, ok := pinnedImage(image, ""); ok {
		return pinned
	}
	imageID := ""
	if podName != "" && namespace != "" {
		imageID = ownImageID(cfg, namespace, podName)
	}
	pinned, ok := pinnedImage(image, imageID)
	if !ok {
		ctrl.Log.WithName("setup").Info("WARNING: the executor's default image is not pinned by digest: set the chart's image.digest "+
			"(or a digest in --operator-image); a tag moved in the registry would change what runs with the store credentials",
			"image", image, "imageID", imageID)
	}
	return pinned
}

// ownImageID reads the manager container's status.imageID of the
// operator's pod, waiting up to ten seconds for the kubelet to report it;
// empty when it does not.
func ownImageID(cfg *rest.Config, namespace, podName string) string {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return ""
	}
	for range 10 {
		pod, err := cs.CoreV1().Pods(namespace).Get(context.Background(), podName, metav1.GetOptions{})
		if err == nil {
			if id := managerImageID(pod); id != "" {
				return id
			}
		}
		time.Sleep(time.Second)
	}
	return ""
}

func managerImageID(pod *corev1.Pod) string {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == "manager" {
			return s.ImageID
		}
	}
	return ""
}

// describeImage is for the start line: the image and how the executor
// runs it.
func describeImage(image, executor string) string {
	if image == executor {
		return image
	}
	return fmt.Sprintf("%s (executor %s)", image, executor)
}
